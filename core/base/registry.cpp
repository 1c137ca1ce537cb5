#include "core/base/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <numeric>

#include "core/base/error.hpp"

namespace aisp {

std::string_view to_string(VariantKind k) {
  switch (k) {
    case VariantKind::baseline: return "baseline";
    case VariantKind::step: return "step";
    case VariantKind::optimized: return "optimized";
    case VariantKind::vendor: return "vendor";
  }
  return "?";
}

std::string_view to_string(ClockKind c) { return c == ClockKind::gpu ? "gpu" : "wall"; }
std::string_view to_string(CacheMode m) { return m == CacheMode::cold ? "cold" : "hot"; }

std::string_view to_string(L2Flush f) { return f == L2Flush::read ? "read" : "write"; }

L2Flush l2_flush_from_env() {
  const char* v = std::getenv("AISP_L2_FLUSH");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "read") return L2Flush::read;
  if (std::string_view(v) == "write") return L2Flush::write;
  throw UsageError(fmt::format("AISP_L2_FLUSH must be read or write, not '{}'", v));
}

std::string VariantInfo::file_stem() const {
  if (kind == VariantKind::vendor) return "vendor_" + slug;
  return fmt::format("{:02d}_{}", step, slug);
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> split_commas(const std::vector<std::string>& selectors) {
  std::vector<std::string> out;
  for (const auto& s : selectors) {
    std::size_t start = 0;
    while (start <= s.size()) {
      const std::size_t comma = s.find(',', start);
      const std::size_t end = comma == std::string::npos ? s.size() : comma;
      std::string part = s.substr(start, end - start);
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

// Adds `variants` of `target` to the selection, keeping targets in catalogue order and variants in ladder
// order, without duplicates.
void add_to(Selection& sel, const TargetInfo& target, const std::vector<const VariantInfo*>& variants) {
  auto it = std::find_if(sel.items.begin(), sel.items.end(),
                         [&](const Selection::Item& item) { return item.target == &target; });
  if (it == sel.items.end()) {
    sel.items.push_back({&target, {}});
    it = sel.items.end() - 1;
  }
  for (const VariantInfo* v : variants) {
    if (std::find(it->variants.begin(), it->variants.end(), v) == it->variants.end()) {
      it->variants.push_back(v);
    }
  }
  std::sort(it->variants.begin(), it->variants.end(), [&](const VariantInfo* a, const VariantInfo* b) {
    return (a - target.variants.data()) < (b - target.variants.data());
  });
}

std::vector<const VariantInfo*> all_variants(const TargetInfo& t) {
  std::vector<const VariantInfo*> out;
  for (const auto& v : t.variants) out.push_back(&v);
  return out;
}

}  // namespace

std::vector<std::string> close_matches(std::string_view wanted,
                                       const std::vector<std::string>& candidates,
                                       std::size_t limit) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(wanted, c);
    // A candidate that contains the wanted text (or the reverse) is a strong hint whatever its length.
    if (c.find(wanted) != std::string::npos || wanted.find(c) != std::string_view::npos) d = 0;
    scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t cutoff = std::max<std::size_t>(3, wanted.size() / 2);
  std::vector<std::string> out;
  for (const auto& [d, c] : scored) {
    if (out.size() >= limit || d > cutoff) break;
    out.push_back(c);
  }
  return out;
}

Selection select(const std::vector<TargetInfo>& catalogue, const std::vector<std::string>& selectors,
                 bool include_hidden) {
  Selection sel;
  const auto parts = split_commas(selectors);
  if (parts.empty()) {
    for (const auto& t : catalogue) {
      if (!t.hidden || include_hidden) add_to(sel, t, all_variants(t));
    }
    return sel;
  }
  for (const auto& part : parts) {
    bool matched = false;
    std::vector<std::string> names;
    for (const auto& t : catalogue) {
      if (t.hidden && !include_hidden) continue;
      names.push_back(t.chapter);
      names.push_back(t.name());
      if (part == t.chapter || part == t.name()) {
        add_to(sel, t, all_variants(t));
        matched = true;
        continue;
      }
      for (const auto& v : t.variants) {
        names.push_back(t.variant_name(v));
        if (part == t.variant_name(v)) {
          add_to(sel, t, {&v});
          matched = true;
        }
      }
    }
    if (!matched) {
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      const auto close = close_matches(part, names);
      std::string hint = close.empty() ? "run 'aisp bench list-targets' to see the targets"
                                       : "did you mean " + fmt::format("{}", fmt::join(close, ", ")) + "?";
      throw UsageError(fmt::format("unknown target selector '{}': {}", part, hint));
    }
  }
  return sel;
}

}  // namespace aisp
