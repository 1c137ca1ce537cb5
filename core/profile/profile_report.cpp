// The profile comparison table, profile.json, the summary kept in results.json and the reading of ncu's
// console output (core/profile/profile.hpp).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/profile/profile.hpp"
#include "core/results/render.hpp"

namespace aisp::profile {

std::string_view to_string(Status s) {
  switch (s) {
    case Status::profiled: return "profiled";
    case Status::no_kernels: return "no_kernels";
    case Status::skipped: return "skipped";
    case Status::failed: return "failed";
  }
  return "?";
}

namespace {

std::string scaled(double v, const char* unit) {
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int p = 0;
  while (std::fabs(v) >= 1000.0 && p < 5) {
    v /= 1000.0;
    ++p;
  }
  return fmt::format("{:.{}f} {}{}", v, p == 0 ? 0 : 2, prefixes[p], unit);
}

// "void aisp::ch07::copy::v01::copy_chunked_kernel(const float *, ...)" -> "copy_chunked_kernel".
std::string short_kernel_name(std::string name) {
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  int depth = 0;
  std::string flat;  // template and parameter lists dropped
  for (char c : name) {
    if (c == '<' || c == '(') ++depth;
    if (depth == 0) flat += c;
    if ((c == '>' || c == ')') && depth > 0) --depth;
  }
  const auto colon = flat.rfind("::");
  if (colon != std::string::npos) flat.erase(0, colon + 2);
  return flat.empty() ? name : flat;
}

std::string stem_of(const std::string& variant, const std::string& target) {
  return variant.size() > target.size() + 1 ? variant.substr(target.size() + 1) : variant;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Pipe utilization as the ComputeWorkloadAnalysis section reports it: sm__inst_executed_pipe_<p> (issue
// share) and sm__pipe_<p>_cycles_active (busy cycles), both as % of peak per active cycle.
std::optional<std::string> pipe_label(const std::string& metric) {
  const std::string_view tail = ".avg.pct_of_peak_sustained_active";
  if (!ends_with(metric, tail)) return std::nullopt;
  const std::string base = metric.substr(0, metric.size() - tail.size());
  if (base.rfind("sm__inst_executed_pipe_", 0) == 0) {
    return "pipe " + base.substr(23) + ", % of issue peak";
  }
  if (base.rfind("sm__pipe_", 0) == 0 && ends_with(base, "_cycles_active")) {
    return "pipe " + base.substr(9, base.size() - 9 - 14) + ", % cycles active";
  }
  return std::nullopt;
}

// Warp stall reasons as WarpStateStats reports them: warps stalled per issued instruction, per reason.
std::optional<std::string> stall_reason(const std::string& metric) {
  const std::string prefix = "smsp__average_warps_issue_stalled_";
  const std::string suffix = "_per_issue_active.ratio";
  if (metric.rfind(prefix, 0) != 0 || !ends_with(metric, suffix)) return std::nullopt;
  const std::string reason = metric.substr(prefix.size(), metric.size() - prefix.size() - suffix.size());
  if (reason == "selected") return std::nullopt;  // issuing, not stalled
  return reason;
}

void add_dynamic_rows(const TargetProfileData& t, ComparisonTable& table) {
  // Pipes: the four busiest across the variants; the tensor pipes, whatever their rank, in one row (the
  // maximum over every tensor pipe the architecture reports: hmma, imma, dmma, gmma on Hopper).
  std::map<std::string, double> busiest;
  for (const auto& v : t.variants) {
    for (const auto& [k, val] : v.launch.values) {
      if (pipe_label(k)) busiest[k] = std::max(busiest[k], val);
    }
  }
  std::vector<std::pair<std::string, double>> pipes(busiest.begin(), busiest.end());
  std::stable_sort(pipes.begin(), pipes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < pipes.size() && shown.size() < 4; ++i) {
    if (pipes[i].first.find("tensor") == std::string::npos) shown.push_back(pipes[i].first);
  }
  std::vector<std::string> tensor_row{"tensor pipes, max % active"};
  for (const auto& v : t.variants) {
    double best = -1;
    for (const auto& [k, val] : v.launch.values) {
      if (pipe_label(k) && k.find("tensor") != std::string::npos) best = std::max(best, val);
    }
    tensor_row.push_back(best < 0 ? "-" : format_value(best, Format::percent));
  }
  table.rows.push_back(std::move(tensor_row));
  for (const auto& k : shown) {
    std::vector<std::string> row{*pipe_label(k)};
    for (const auto& v : t.variants) {
      const auto it = v.launch.values.find(k);
      row.push_back(it == v.launch.values.end() ? "-" : format_value(it->second, Format::percent));
    }
    table.rows.push_back(std::move(row));
  }
  // Stalls: each variant's top three reasons, as "reason value".
  for (std::size_t rank = 0; rank < 3; ++rank) {
    std::vector<std::string> row{fmt::format("stall #{} (warps per issue)", rank + 1)};
    for (const auto& v : t.variants) {
      std::vector<std::pair<double, std::string>> stalls;
      for (const auto& [k, val] : v.launch.values) {
        if (auto r = stall_reason(k)) stalls.emplace_back(val, *r);
      }
      std::sort(stalls.rbegin(), stalls.rend());
      row.push_back(rank < stalls.size() ? fmt::format("{} {:.2f}", stalls[rank].second, stalls[rank].first)
                                         : "-");
    }
    table.rows.push_back(std::move(row));
  }
}

}  // namespace

std::string format_value(double v, Format f) {
  switch (f) {
    case Format::duration_ns: return format_duration_ms(v * 1e-6);
    case Format::percent: return fmt::format("{:.1f}%", v);
    case Format::bytes: return scaled(v, "B");
    case Format::bytes_per_second: return scaled(v, "B/s");
    case Format::ratio: return fmt::format("{:.2f}", v);
    case Format::count:
      return std::fabs(v) < 1e6 && v == std::floor(v) ? fmt::format("{:.0f}", v) : scaled(v, "");
    case Format::text: break;
  }
  return fmt::format("{}", v);
}

ComparisonTable comparison_table(const TargetProfileData& t, MetricSet set) {
  const SetSpec& spec = set_spec(set);
  ComparisonTable table;
  std::string axes;
  for (const auto& [k, val] : t.axes) axes += fmt::format("{}{}={}", axes.empty() ? "" : " ", k, val);
  table.heading = fmt::format("{} — Nsight Compute, set {} ({}; {} L2; declared {} per launch)", t.name,
                              to_string(set), axes, to_string(t.mode), scaled(t.bytes_per_launch, "B"));
  table.columns.push_back("metric");
  std::vector<std::string> kernel_row{"kernel"};
  for (const auto& v : t.variants) {
    table.columns.push_back(stem_of(v.name, t.name));
    if (v.status != Status::profiled) {
      kernel_row.push_back(v.status == Status::no_kernels ? "(no kernels)"
                                                          : fmt::format("({})", to_string(v.status)));
      table.notes.push_back(fmt::format("{}: {}{}", stem_of(v.name, t.name), to_string(v.status),
                                        v.reason.empty() ? "" : ": " + v.reason));
      continue;
    }
    const auto& names = v.launch.kernel_names;
    kernel_row.push_back(names.empty() ? "-"
                                       : short_kernel_name(names.front()) +
                                             (names.size() > 1 ? fmt::format(" +{}", names.size() - 1) : ""));
  }
  table.rows.push_back(std::move(kernel_row));
  for (const auto& r : spec.rows) {
    std::vector<std::string> row{r.label};
    for (const auto& v : t.variants) {
      const auto it = v.launch.values.find(r.key);
      row.push_back(it == v.launch.values.end() ? "-" : format_value(it->second, r.format));
    }
    table.rows.push_back(std::move(row));
  }
  const bool has_bytes =
      std::any_of(t.variants.begin(), t.variants.end(), [](const auto& v) { return v.bytes; });
  if (has_bytes) {
    std::vector<std::string> row{"DRAM bytes / declared"};
    std::vector<std::pair<std::string, BytesCheck>> checks;
    bool flagged = false;
    for (const auto& v : t.variants) {
      if (!v.bytes) {
        row.push_back("-");
        continue;
      }
      checks.emplace_back(stem_of(v.name, t.name), *v.bytes);
      flagged = flagged || v.bytes->mismatch;
      row.push_back(fmt::format("{:.2f}x{}", v.bytes->ratio, v.bytes->mismatch ? " !" : ""));
    }
    table.rows.push_back(std::move(row));
    if (flagged) {
      table.notes.push_back(
          fmt::format("! = measured DRAM bytes differ from the declared {} by more than {:.0f}%",
                      scaled(t.bytes_per_launch, "B"), 100 * k_bytes_tolerance));
    }
    const bool judged =
        std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.second.judged; });
    const std::string finding = declaration_finding(checks);
    if (!judged) {
      table.notes.push_back(fmt::format(
          "DRAM bytes not judged: the declared {} per launch is under {:.0f}x the L2 ({}), so written data "
          "can stay in L2 past the kernel; profile a larger size to check the declaration",
          scaled(t.bytes_per_launch, "B"), k_l2_margin, scaled(t.l2_bytes, "B")));
    } else {
      table.notes.push_back(finding.empty()
                                ? "declared DRAM bytes: consistent with the leanest variant (within 10%)"
                                : finding);
    }
  }
  if (spec.stall_and_pipe_rows) add_dynamic_rows(t, table);
  return table;
}

std::string render_comparison(const ComparisonTable& t) {
  std::vector<std::size_t> width(t.columns.size(), 0);
  const auto widen = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  };
  widen(t.columns);
  for (const auto& r : t.rows) widen(r);
  const auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
      // Labels left, numbers right, so that digits line up down a column.
      s += i == 0 ? fmt::format("{:<{}}", r[i], width[i]) : fmt::format("  {:>{}}", r[i], width[i]);
    }
    return s + "\n";
  };
  std::string out = t.heading + "\n" + line(t.columns);
  for (const auto& r : t.rows) out += line(r);
  for (const auto& n : t.notes) out += "  note: " + n + "\n";
  return out;
}

nlohmann::ordered_json to_json(const ProfileRunData& run) {
  using ojson = nlohmann::ordered_json;
  ojson targets = ojson::array();
  for (const auto& t : run.targets) {
    ojson axes = ojson::object();
    for (const auto& [k, val] : t.axes) axes[k] = val;
    ojson variants = ojson::array();
    std::vector<std::pair<std::string, BytesCheck>> checks;
    for (const auto& v : t.variants) {
      ojson kernels = ojson::array();
      for (const auto& k : v.kernels) {
        ojson metrics = ojson::object();
        for (const auto& [name, cell] : k.metrics)
          metrics[name] = ojson{{"value", cell.value}, {"unit", cell.unit}};
        kernels.push_back(ojson{
            {"id", k.id}, {"name", k.name}, {"block", k.block}, {"grid", k.grid}, {"metrics", metrics}});
      }
      ojson launch = ojson::object();
      for (const auto& [name, val] : v.launch.values) launch[name] = val;
      ojson bytes = nullptr;
      if (v.bytes) {
        checks.emplace_back(v.name, *v.bytes);
        bytes = ojson{{"declared", v.bytes->declared},
                      {"measured", v.bytes->measured},
                      {"ratio", v.bytes->ratio},
                      {"judged", v.bytes->judged},
                      {"mismatch", v.bytes->mismatch}};
      }
      variants.push_back(ojson{{"name", v.name},
                               {"status", to_string(v.status)},
                               {"reason", v.reason},
                               {"report", v.report},
                               {"csv", v.csv},
                               {"log", v.log},
                               {"command", quote_command(v.command)},
                               {"launch", launch},
                               {"dram_bytes_check", bytes},
                               {"kernels", kernels}});
      if (v.source || !v.source_error.empty()) {
        variants.back()["source_csv"] = v.source_csv;
        variants.back()["source"] = v.source ? to_json(*v.source) : ojson(nullptr);
        variants.back()["source_error"] = v.source_error;
      }
    }
    targets.push_back(ojson{{"name", t.name},
                            {"axes", axes},
                            {"mode", to_string(t.mode)},
                            {"declared_bytes_per_launch", t.bytes_per_launch},
                            {"l2_bytes", t.l2_bytes},
                            {"declaration_finding", declaration_finding(checks)},
                            {"variants", variants}});
  }
  return ojson{{"schema", "aisp.profile"},
               {"schema_version", 1},
               {"set", to_string(run.set)},
               {"replay_mode", to_string(run.replay)},
               {"clock_control", run.clock_control},
               {"ncu", {{"path", run.ncu}, {"version", run.ncu_version}}},
               {"device", run.device},
               {"targets", targets}};
}

VariantProfile summarize(const VariantProfileData& v, MetricSet set) {
  VariantProfile p;
  p.set = std::string(to_string(set));
  p.report = v.report;
  if (v.status != Status::profiled) {
    p.error = std::string(to_string(v.status)) + (v.reason.empty() ? "" : ": " + v.reason);
    return p;
  }
  for (const auto& r : set_spec(set).rows) {
    const auto it = v.launch.values.find(r.key);
    if (it != v.launch.values.end()) p.metrics[r.key] = it->second;
  }
  if (v.bytes) {
    p.metrics[k_dram_bytes] = v.bytes->measured;
    p.dram_bytes_ratio = v.bytes->ratio;
    p.bytes_mismatch = v.bytes->mismatch;
  }
  return p;
}

std::string diagnose_ncu_output(std::string_view log) {
  std::vector<std::string> errors;
  std::size_t start = 0;
  while (start < log.size()) {
    const std::size_t nl = std::min(log.find('\n', start), log.size());
    std::string line(log.substr(start, nl - start));
    start = nl + 1;
    const auto at = line.find("==ERROR==");
    if (at == std::string::npos) continue;
    line.erase(0, at + 9);
    line.erase(0, line.find_first_not_of(" \t"));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) errors.push_back(line);
  }
  if (errors.empty()) return {};
  const auto clip = [](std::string s) {
    if (s.size() > 180) s = s.substr(0, 177) + "...";
    return s;
  };
  for (const auto& e : errors) {
    if (e.find("ERR_NVGPUCTRPERM") != std::string::npos) {
      return "cannot read the GPU performance counters: ERR_NVGPUCTRPERM (profiling is restricted to admin "
             "users on this machine; ncu: \"" +
             clip(e) + "\")";
    }
  }
  for (const auto& e : errors) {
    if (e.find("resource was unavailable") != std::string::npos ||
        e.find("concurrently") != std::string::npos) {
      return "cannot read the GPU performance counters: another tool holds them (e.g. DCGM); ncu: \"" +
             clip(e) + "\"";
    }
    if (e.find("not supported") != std::string::npos) {
      return "cannot read the GPU performance counters: profiling is not supported here (a virtualized GPU "
             "or "
             "a MIG slice); ncu: \"" +
             clip(e) + "\"";
    }
  }
  return "ncu: " + clip(errors.front());
}

bool is_machine_wide(std::string_view cause) {
  return cause.find("cannot read the GPU performance counters") != std::string_view::npos;
}

bool no_kernels_profiled(std::string_view log) {
  return log.find("No kernels were profiled") != std::string_view::npos;
}

}  // namespace aisp::profile
