// Nsight Compute's Source page, per SASS instruction (core/profile/source_page.hpp).
#include "core/profile/source_page.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "core/base/error.hpp"
#include "core/profile/profile.hpp"

namespace aisp::profile {

namespace {

constexpr std::string_view k_samples_column = "Warp Stall Sampling (All Samples)";
constexpr std::string_view k_executed_column = "Instructions Executed";
constexpr std::string_view k_stall_prefix = "stall_";
constexpr std::string_view k_not_issued_suffix = "(Not Issued)";

// "@!P0  BRA 0x7f91..." -> "BRA"; "IMAD.MOV.U32 R4, RZ, RZ, R22" -> "IMAD.MOV.U32". The predicate guard
// does not change what executes.
std::string opcode_of(const std::string& sass) {
  std::size_t i = sass.find_first_not_of(' ');
  if (i == std::string::npos) return "";
  if (sass[i] == '@') {
    i = sass.find(' ', i);
    if (i == std::string::npos) return "";
    i = sass.find_first_not_of(' ', i);
    if (i == std::string::npos) return "";
  }
  const std::size_t end = sass.find_first_of(" ;", i);
  return sass.substr(i, end == std::string::npos ? std::string::npos : end - i);
}

std::string trimmed(const std::string& s) {
  const std::size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

double number_or_zero(const std::vector<std::string>& row, std::size_t column) {
  if (column >= row.size()) return 0.0;
  return parse_number(row[column]).value_or(0.0);
}

template <class Map>
std::vector<std::pair<std::string, double>> largest_first(const Map& totals, std::size_t keep) {
  std::vector<std::pair<std::string, double>> out(totals.begin(), totals.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::erase_if(out, [](const auto& e) { return e.second <= 0; });
  if (out.size() > keep) out.resize(keep);
  return out;
}

std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

}  // namespace

std::vector<std::string> source_export_command(const std::string& ncu, const std::string& report) {
  return {ncu, "--import", report, "--csv", "--page", "source", "--print-source", "sass"};
}

SourceSummary summarize_source_page(std::string_view csv, std::size_t top) {
  const auto records = csv_records(csv);
  SourceSummary s;
  std::map<std::string, double> reasons, mix;
  std::vector<HotInstruction> all;
  struct Columns {
    std::size_t address = 0, sass = 1, samples = 0, executed = 0;
    std::vector<std::pair<std::string, std::size_t>> stalls;  // reason, column
  };
  Columns cols;
  bool have_header = false;
  for (const auto& row : records) {
    if (row.empty()) continue;
    if (row[0] == "Kernel Name") {
      s.kernels.push_back(row.size() > 1 ? row[1] : "");
      have_header = false;
      continue;
    }
    if (s.kernels.empty()) continue;  // ncu's chatter before the first kernel
    if (!have_header) {
      if (row[0] != "Address") {
        throw DataError("ncu source page: expected the \"Address\" header after \"Kernel Name\", got \"" + row[0] +
                        "\"");
      }
      cols = Columns{};
      bool samples = false, executed = false;
      for (std::size_t c = 0; c < row.size(); ++c) {
        const std::string& name = row[c];
        if (name == "Source") cols.sass = c;
        if (name == k_samples_column) cols.samples = c, samples = true;
        if (name == k_executed_column) cols.executed = c, executed = true;
        if (name.starts_with(k_stall_prefix) && !name.ends_with(k_not_issued_suffix)) {
          cols.stalls.emplace_back(name.substr(k_stall_prefix.size()), c);
        }
      }
      if (!samples || !executed) {
        throw DataError(
            "ncu source page: no stall-sampling or executed-instruction column (was the report captured with "
            "the SourceCounters section, as --set full does?)");
      }
      have_header = true;
      continue;
    }
    HotInstruction h;
    h.kernel = s.kernels.back();
    h.address = row[cols.address];
    h.sass = cols.sass < row.size() ? trimmed(row[cols.sass]) : "";
    h.samples = number_or_zero(row, cols.samples);
    std::vector<std::pair<std::string, double>> own;  // this instruction's reasons (one column each)
    for (const auto& [reason, c] : cols.stalls) {
      const double v = number_or_zero(row, c);
      reasons[reason] += v;
      if (v > 0) own.emplace_back(reason, v);
    }
    h.reasons = largest_first(own, 3);
    const double executed = number_or_zero(row, cols.executed);
    s.executed += executed;
    if (const std::string op = opcode_of(h.sass); !op.empty()) mix[op] += executed;
    s.samples += h.samples;
    ++s.instructions;
    all.push_back(std::move(h));
  }
  if (s.kernels.empty()) {
    throw DataError("ncu source page: no \"Kernel Name\" block (not a --page source export?)");
  }
  if (!have_header) throw DataError("ncu source page: a kernel block without its header row");
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.samples > b.samples; });
  std::erase_if(all, [](const HotInstruction& h) { return h.samples <= 0; });
  if (all.size() > top) all.resize(top);
  s.hottest = std::move(all);
  s.reasons = largest_first(reasons, reasons.size());
  s.mix = largest_first(mix, top);
  return s;
}

std::string render_source_summary(const SourceSummary& s, const std::string& variant) {
  std::string out = fmt::format("{}: {:.0f} stall samples over {} SASS instructions", variant, s.samples,
                                s.instructions);
  if (s.kernels.size() > 1) out += fmt::format(" ({} kernels)", s.kernels.size());
  out += "\n  stall reasons:";
  const std::size_t reasons_shown = std::min<std::size_t>(8, s.reasons.size());
  for (std::size_t i = 0; i < reasons_shown; ++i) {
    out += fmt::format(" {} {}{}", s.reasons[i].first, percent(s.reasons[i].second, s.samples),
                       i + 1 < reasons_shown ? "," : "");
  }
  out += "\n  hottest instructions (share of all samples; its top reasons):\n";
  std::size_t width = 0;
  for (const auto& h : s.hottest) width = std::max(width, h.sass.size());
  width = std::min<std::size_t>(width, 60);
  for (const auto& h : s.hottest) {
    std::string why;
    for (const auto& [reason, v] : h.reasons) {
      why += fmt::format("{}{} {}", why.empty() ? "" : ", ", reason, percent(v, s.samples));
    }
    const std::string sass = h.sass.size() > width ? h.sass.substr(0, width - 3) + "..." : h.sass;
    out += fmt::format("    {:>6}  {:<{}}  {}\n", percent(h.samples, s.samples), sass, width, why);
  }
  const std::string executed = s.executed >= 1e6   ? fmt::format("{:.2f} M", s.executed / 1e6)
                               : s.executed >= 1e3 ? fmt::format("{:.1f} k", s.executed / 1e3)
                                                   : fmt::format("{:.0f}", s.executed);
  out += fmt::format("  instruction mix ({} warp instructions executed):", executed);
  for (std::size_t i = 0; i < s.mix.size(); ++i) {
    out += fmt::format(" {} {}{}", s.mix[i].first, percent(s.mix[i].second, s.executed),
                       i + 1 < s.mix.size() ? "," : "");
  }
  return out + "\n";
}

nlohmann::ordered_json to_json(const SourceSummary& s) {
  using ojson = nlohmann::ordered_json;
  ojson reasons = ojson::object();
  for (const auto& [r, v] : s.reasons) reasons[r] = v;
  ojson hottest = ojson::array();
  for (const auto& h : s.hottest) {
    ojson why = ojson::object();
    for (const auto& [r, v] : h.reasons) why[r] = v;
    hottest.push_back(ojson{{"kernel", h.kernel},
                            {"address", h.address},
                            {"sass", h.sass},
                            {"samples", h.samples},
                            {"reasons", why}});
  }
  ojson mix = ojson::array();
  for (const auto& [op, v] : s.mix) mix.push_back(ojson{{"opcode", op}, {"executed", v}});
  return ojson{{"kernels", s.kernels}, {"instructions", s.instructions}, {"samples", s.samples},
               {"executed", s.executed}, {"reasons", reasons}, {"hottest", hottest}, {"mix", mix}};
}

}  // namespace aisp::profile
