#include "core/report/report_markdown.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <fmt/format.h>
#include <map>

#include "core/base/error.hpp"
#include "core/results/render.hpp"
#include "core/report/report_summary.hpp"

namespace aisp {

namespace fs = std::filesystem;

namespace {

std::string cuda_version(int v) {
  return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : "unknown";
}

std::string short_variant(const std::string& variant, const std::string& target) {
  return variant.rfind(target + ":", 0) == 0 ? variant.substr(target.size() + 1) : variant;
}

std::string throughput_of(const TargetResult& t, const VariantResult& v) {
  if (!v.stats)
    return "-";
  if (t.flops_per_launch > 0 && t.flops_per_launch >= t.bytes_per_launch) {
    return fmt::format("{:.1f} TFLOP/s", v.tflop_per_s);
  }
  return t.bytes_per_launch > 0 ? fmt::format("{:.0f} GB/s", v.gb_per_s) : "-";
}

std::string comparison_text(const std::optional<Comparison>& c, bool percent) {
  if (!c)
    return "-";
  const double k = percent ? 100 : 1;
  const char* unit = percent ? "%" : "x";
  std::string s =
      percent ? fmt::format("{:.1f}% [{:.1f}, {:.1f}]", k * c->value, k * c->low, k * c->high)
              : fmt::format("{:.2f}{} [{:.2f}, {:.2f}]", c->value, unit, c->low, c->high);
  return c->significant ? s : s + " (n.s.)";
}

// ", throttled (sw_power_cap)" for an entry measured while the GPU throttled: the number stands, but was not
// taken at the clocks an unthrottled run gets.
std::string throttled_text(const VariantExpectation& v) {
  if (!v.throttled)
    return "";
  if (v.throttle_reasons.empty())
    return ", throttled";
  return fmt::format(", throttled ({})", fmt::join(v.throttle_reasons, ", "));
}

std::string sha_text(const std::string& sha, const std::string& dirty) {
  std::string s = sha.substr(0, std::min<std::size_t>(10, sha.size()));
  if (dirty == "true")
    s += " (dirty)";
  return s.empty() ? "unknown" : s;
}

} // namespace

std::string point_title(const RunResults& run, const TargetResult& t) {
  const bool swept = std::any_of(run.targets.begin(), run.targets.end(), [&](const TargetResult& x) {
    return x.name == t.name && x.axes != t.axes;
  });
  return swept ? t.name + " " + format_axes(t.axes, " ") : t.name;
}

TextTable report_table(const TargetResult& t) {
  TextTable table{{"variant", "kind", "median", "95% CI of median", "throughput", "% of ceiling",
                   "speedup vs baseline [95% CI]", "% of vendor [95% CI]", "verdict"},
                  {}};
  // Registers, occupancy, ...: a column only for targets whose variants report them.
  const bool facts = has_facts(t);
  if (facts) table.header.insert(table.header.end() - 1, "facts");
  for (const auto& v : t.variants) {
    const auto pct = percent_of_ceiling(v);
    std::string verdict(to_string(v.verdict));
    if (!v.reason.empty())
      verdict += ": " + v.reason;
    const auto* s = v.stats ? &*v.stats : nullptr;
    table.rows.push_back({short_variant(v.name, t.name), std::string(to_string(v.kind)),
                          s ? format_duration_ms(s->median) : "-",
                          s ? fmt::format("[{}, {}]", format_duration_ms(s->median_ci.low),
                                          format_duration_ms(s->median_ci.high))
                            : "-",
                          throughput_of(t, v), pct ? fmt::format("{:.1f}%", *pct) : "-",
                          comparison_text(v.speedup_vs_baseline, false),
                          comparison_text(v.fraction_of_vendor, true), verdict});
    if (facts) table.rows.back().insert(table.rows.back().end() - 1, format_facts(v.facts));
  }
  return table;
}

std::vector<std::pair<std::string, std::string>> run_facts(const LoadedRun& run) {
  // A merged run (merge_runs) names each of its runs with its own date and commit instead.
  if (run.manifest.is_object() && run.manifest.contains("merged_runs")) {
    std::vector<std::pair<std::string, std::string>> facts{
        {"hardware", run.results.hardware_key +
                         (run.provenance.device_name.empty() ? "" : " (" + run.provenance.device_name + ")")}};
    for (const auto& m : run.manifest.at("merged_runs")) {
      const RunProvenance p = provenance_from_manifest(m.value("manifest", nlohmann::json()));
      facts.emplace_back("run", fmt::format("{} ({}, git {})", m.value("run_id", p.run_id),
                                            m.value("created_utc", p.created_utc),
                                            sha_text(p.git_sha, p.git_dirty)));
    }
    return facts;
  }
  const auto& p = run.provenance;
  std::vector<std::pair<std::string, std::string>> facts{
      {"run", run.results.run_id},
      {"date (UTC)", run.results.created_utc},
      {"hardware",
       run.results.hardware_key + (p.device_name.empty() ? "" : " (" + p.device_name + ")")},
  };
  if (p.driver_version || p.runtime_version) {
    facts.emplace_back(
        "CUDA driver / runtime",
        fmt::format("{} / {}", cuda_version(p.driver_version), cuda_version(p.runtime_version)));
  }
  if (!p.git_sha.empty())
    facts.emplace_back("git", sha_text(p.git_sha, p.git_dirty));
  if (!p.build_type.empty())
    facts.emplace_back("build", p.build_type);
  if (!p.hostname.empty())
    facts.emplace_back("host", p.hostname);
  if (!p.clocks_policy.empty())
    facts.emplace_back("clocks", p.clocks_policy);
  if (run.manifest.is_object() && run.manifest.contains("argv") &&
      run.manifest.at("argv").is_array()) {
    std::string cmd;
    for (const auto& a : run.manifest.at("argv")) {
      if (a.is_string())
        cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
    }
    if (!cmd.empty())
      facts.emplace_back("command", cmd);
  }
  return facts;
}

std::string verdict_counts(const TargetResult& t) {
  std::vector<std::string> parts;
  for (Verdict v : {Verdict::pass, Verdict::fail, Verdict::invalid, Verdict::implausible,
                    Verdict::noisy, Verdict::skipped, Verdict::error}) {
    const auto n = std::count_if(t.variants.begin(), t.variants.end(),
                                 [&](const VariantResult& r) { return r.verdict == v; });
    if (n > 0)
      parts.push_back(fmt::format("{} {}", n, to_string(v)));
  }
  return parts.empty() ? "no variants" : fmt::format("{}", fmt::join(parts, ", "));
}

std::string target_config(const TargetResult& t) {
  std::string axes;
  for (const auto& [k, v] : t.axes)
    axes += fmt::format(", {}={}", k, v);
  return fmt::format("{} L2, {} clock{}; declared {:.3g} GB and {:.3g} GFLOP per launch",
                     to_string(t.mode), to_string(t.clock), axes, t.bytes_per_launch * 1e-9,
                     t.flops_per_launch * 1e-9);
}

std::string render_markdown_report(const LoadedRun& run, const ReportOptions& options,
                                   const std::vector<LoadgenFile>& serving) {
  std::string out = fmt::format("# aisp run {}\n\n", run.results.run_id);
  TextTable facts{{"", ""}, {}};
  for (const auto& [k, v] : run_facts(run))
    facts.rows.push_back({k, v});
  out += render_text_table(facts, OutputFormat::markdown) + "\n";
  TextTable summary{{"ladder", "points", "best step", "% of ceiling", "speed vs vendor",
                     "speedup vs baseline", "verdicts", "vs stored expectations"},
                    {}};
  for (const auto& r : summarize_ladders(run, options)) {
    std::string best = r.best.empty() ? "-" : r.best;
    if (!r.best.empty() && r.best_points < r.points)
      best += fmt::format(" (at {}/{} points)", r.best_points, r.points);
    summary.rows.push_back({r.ladder, std::to_string(r.points), best,
                            format_range(r.percent_of_ceiling, "%", 1),
                            format_range(r.fraction_of_vendor, "x", 2),
                            format_range(r.speedup_vs_baseline, "x", 2), r.verdicts,
                            r.expectations});
  }
  out += "## Summary\n\n" + render_text_table(summary, OutputFormat::markdown) + "\n";
  for (const auto& g : group_ladders(run.results)) {
    const TargetResult& first = *g.points.front();
    out += fmt::format("## {}{}\n\n", g.name, first.summary.empty() ? "" : " — " + first.summary);
    for (const auto* t : g.points) {
      if (g.points.size() > 1)
        out += fmt::format("### {}\n\n", point_title(run.results, *t));
      out += target_config(*t) + "\n\n";
      out += render_text_table(report_table(*t), OutputFormat::markdown);
      out += "\nVerdicts: " + verdict_counts(*t) + "\n\n";
    }
  }
  out += render_serving_markdown(serving);
  out +=
      "Generated by `aisp report` from this run's results.json; charts are in the HTML report.\n";
  return out;
}

std::string render_markdown_report(const std::vector<LoadgenFile>& serving) {
  return "# aisp serving report\n\n" + render_serving_markdown(serving) +
         "Generated by `aisp report` from aisp loadgen files; the latency-throughput curves are in "
         "the HTML report.\n";
}

std::string render_expectations_markdown(const std::vector<Expectations>& stored) {
  std::string out;
  for (const auto& e : stored) {
    std::string device;
    for (const auto& v : e.variants) {
      if (!v.provenance.device.empty())
        device = v.provenance.device;
    }
    std::string axes;
    for (const auto& [k, v] : e.axes)
      axes += fmt::format(", {}={}", k, v);
    out += fmt::format("**{}**{}: {} L2, {} clock{}.\n\n", e.hardware_key,
                       device.empty() ? "" : " (" + device + ")", e.mode, e.clock, axes);
    TextTable t{{"variant", "kind", "median [95% CI]", "throughput", "% of ceiling",
                 "speedup vs baseline [95% CI]", "measured (UTC, git)"},
                {}};
    for (const auto& v : e.variants) {
      std::string throughput;
      if (v.gb_per_s > 0)
        throughput = fmt::format("{:.0f} GB/s", v.gb_per_s);
      if (v.tflop_per_s > 0)
        throughput +=
            fmt::format("{}{:.1f} TFLOP/s", throughput.empty() ? "" : ", ", v.tflop_per_s);
      const auto& p = v.provenance;
      t.rows.push_back(
          {short_variant(v.name, e.target), v.kind,
           fmt::format("{} [{}, {}]", format_duration_ms(v.median_ms),
                       format_duration_ms(v.ci_low_ms), format_duration_ms(v.ci_high_ms)),
           throughput.empty() ? "-" : throughput,
           v.percent_of_ceiling ? fmt::format("{:.1f}%", *v.percent_of_ceiling) : "-",
           v.speedup_vs_baseline
               ? fmt::format("{:.2f}x [{:.2f}, {:.2f}]", v.speedup_vs_baseline->value,
                             v.speedup_vs_baseline->low, v.speedup_vs_baseline->high)
               : "-",
           fmt::format("{}, {}{}", p.date.substr(0, 10), sha_text(p.git_sha, p.git_dirty),
                       throttled_text(v))});
    }
    out += render_text_table(t, OutputFormat::markdown) + "\n";
    // Facts (a serving ladder's goodput and latency percentiles, a draft's acceptance) come from one
    // launch like the timed ones: listed under the table, apart from the intervals above.
    std::string facts;
    for (const auto& v : e.variants) {
      if (!v.facts.empty())
        facts += fmt::format("- `{}`: {}\n", short_variant(v.name, e.target), format_facts(v.facts));
    }
    if (!facts.empty())
      out += "Facts, from one launch like the timed ones (no interval):\n\n" + facts + "\n";
  }
  out +=
      "Generated by `aisp report --update-readme` from the expectations files beside this README; "
      "do not edit between the markers.\n";
  return out;
}

std::optional<std::string> replace_marked_section(const std::string& text,
                                                  const std::string& content) {
  const std::string begin = k_readme_begin, end = k_readme_end;
  const auto b = text.find(begin);
  const auto e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b)
    return std::nullopt;
  if (text.find(begin, b + 1) != std::string::npos || text.find(end, e + 1) != std::string::npos)
    return std::nullopt;
  std::string body = content;
  if (!body.empty() && body.back() != '\n')
    body += '\n';
  return text.substr(0, b + begin.size()) + "\n" + body + text.substr(e);
}

std::vector<ReadmeUpdate> update_readmes(const std::string& chapters_dir,
                                         const std::vector<std::string>& selectors) {
  std::error_code ec;
  if (!fs::is_directory(chapters_dir, ec)) {
    throw UsageError(
        fmt::format("chapters folder {} does not exist (see --chapters-dir)", chapters_dir));
  }
  std::vector<std::pair<std::string, fs::path>> ladders; // target name, folder
  for (const auto& chapter : fs::directory_iterator(chapters_dir, ec)) {
    if (!chapter.is_directory())
      continue;
    const std::string cname = chapter.path().filename().string();
    const std::string chapter_id = cname.substr(0, cname.find('_'));
    for (const auto& ladder : fs::directory_iterator(chapter.path(), ec)) {
      // A ladder folder has its problem.hpp (docs/architecture.md), or, for a ladder whose code lives
      // in another layer (ch16:serving, in serving/ladder/), its README with the results markers; others
      // are shared code (ch09_intensity_fusion/common) and have no README table to update.
      const auto has_markers = [&](const fs::path& readme) {
        std::ifstream in(readme);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text.find("<!-- aisp:results:begin -->") != std::string::npos;
      };
      if (ladder.is_directory() && (fs::exists(ladder.path() / "problem.hpp", ec) ||
                                    (!fs::exists(ladder.path() / "CMakeLists.txt", ec) &&
                                     has_markers(ladder.path() / "README.md"))))
        ladders.emplace_back(chapter_id + ":" + ladder.path().filename().string(), ladder.path());
    }
  }
  std::sort(ladders.begin(), ladders.end());
  std::vector<ReadmeUpdate> updates;
  for (const auto& [target, folder] : ladders) {
    if (!selector_matches(target, selectors))
      continue;
    ReadmeUpdate u;
    u.target = target;
    u.readme = (folder / "README.md").string();
    std::vector<Expectations> stored;
    try {
      stored = read_all_expectations(folder.string());
    } catch (const DataError& e) {
      u.error = e.what();
      updates.push_back(std::move(u));
      continue;
    }
    if (stored.empty()) {
      // Only worth a line when the ladder was asked for by name.
      if (!selectors.empty()) {
        u.error = "no stored expectations (write them with: aisp bench run --targets " + target +
                  " --update-expectations)";
        updates.push_back(std::move(u));
      }
      continue;
    }
    std::string text;
    try {
      text = read_text_file(u.readme);
    } catch (const std::exception&) {
      u.error = fmt::format("no {} to update (a ladder README carries the table between {} and {})",
                            u.readme, k_readme_begin, k_readme_end);
      updates.push_back(std::move(u));
      continue;
    }
    const auto replaced = replace_marked_section(text, render_expectations_markdown(stored));
    if (!replaced) {
      u.error = fmt::format("{} lacks one '{}' followed by one '{}'; left as it is", u.readme,
                            k_readme_begin, k_readme_end);
    } else if (*replaced != text) {
      try {
        write_file_atomically(u.readme, *replaced);
        u.written = true;
      } catch (const std::exception& e) {
        u.error = e.what();
      }
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

} // namespace aisp
