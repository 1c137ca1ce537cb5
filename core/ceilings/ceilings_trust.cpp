// Which measured ceilings may be believed and cached (docs/ceilings.md "When ceilings are refused").
// A ceiling is what every result is placed against and what the physics check's floor is made of: one
// measured too low makes every honest variant look like 1,500% of it and the floor useless, for as long
// as the cache lives. So a value far under the datasheet is refused, and what was measured beside it is
// not taken on trust either.
#include <fmt/format.h>

#include <algorithm>

#include "core/ceilings/ceilings.hpp"

namespace aisp {

namespace {

std::string value_text(double v, std::string_view unit) {
  return unit == k_unit_tflop_s ? fmt::format("{:.1f} {}", v, unit) : fmt::format("{:.0f} {}", v, unit);
}

// The GPU's own ceilings: what its datasheet describes whatever host it sits in.
bool gpu_own(const CeilingEntry& c) { return c.group == "dram" || c.group == "compute" || c.group == "tensor"; }

struct Check {
  double value = 0;
  std::string model;
};

std::optional<Check> datasheet_check(const CeilingSet& set, const CeilingEntry& c) {
  if (!c.measured() || !gpu_own(c)) return std::nullopt;
  if (c.unit != k_unit_gb_s && c.unit != k_unit_tflop_s) return std::nullopt;
  const auto ds = datasheet_for(set.gpu_name);
  if (!ds) return std::nullopt;
  // A MIG slice (or any device with part of the SMs) has part of the bandwidth and compute.
  if (set.sm_count > 0 && ds->sm_count > 0 && set.sm_count < ds->sm_count) return std::nullopt;
  const auto v = ds->value(c.name);
  if (!v || *v <= 0) return std::nullopt;
  return Check{*v, ds->model};
}

}  // namespace

std::optional<double> datasheet_check_value(const CeilingSet& set, const CeilingEntry& c) {
  if (const auto check = datasheet_check(set, c)) return check->value;
  return std::nullopt;
}

std::optional<std::string> implausible_ceiling(const CeilingSet& set, const CeilingEntry& c) {
  const auto check = datasheet_check(set, c);
  if (!check || c.value >= k_min_datasheet_fraction * check->value) return std::nullopt;
  return fmt::format("{} = {} is {:.1f}% of the {} datasheet's {} (under {:.0f}%): a measurement gone wrong "
                     "(an instrumentation tool, a throttled or shared GPU), not a ceiling",
                     c.name, value_text(c.value, c.unit), 100 * c.value / check->value, check->model,
                     value_text(check->value, c.unit), 100 * k_min_datasheet_fraction);
}

CacheDecision decide_cacheable(const CeilingSet& set, const std::vector<CeilingEntry>& fresh,
                               const std::optional<Instrumentation>& tool) {
  CacheDecision d;
  if (tool) {
    for (const auto& e : fresh) d.refused.emplace_back(e.name, instrumentation_refusal(*tool));
    return d;
  }
  std::vector<std::string> implausible;
  for (const auto& e : fresh) {
    if (auto why = implausible_ceiling(set, e)) {
      d.refused.emplace_back(e.name, std::move(*why));
      implausible.push_back(e.name);
    }
  }
  for (const auto& e : fresh) {
    if (std::find(implausible.begin(), implausible.end(), e.name) != implausible.end()) continue;
    if (!implausible.empty() && e.measured() && !datasheet_check(set, e)) {
      d.refused.emplace_back(e.name, fmt::format("{} = {} not cached: measured in the same pass as {} (refused as "
                                                 "implausible), and no datasheet value can vouch for it",
                                                 e.name, value_text(e.value, e.unit), fmt::join(implausible, ", ")));
      continue;
    }
    d.keep.push_back(e);
  }
  return d;
}

std::string refusal_summary(const std::vector<std::pair<std::string, std::string>>& refused) {
  constexpr std::size_t k_shown = 2;
  std::string out;
  for (std::size_t i = 0; i < refused.size() && i < k_shown; ++i) out += (i ? "; " : "") + refused[i].second;
  if (refused.size() > k_shown) {
    std::vector<std::string> rest;
    for (std::size_t i = k_shown; i < refused.size(); ++i) rest.push_back(refused[i].first);
    out += fmt::format("; also refused: {}", fmt::join(rest, ", "));
  }
  return out;
}

}  // namespace aisp
