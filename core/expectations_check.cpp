#include "core/expectations_check.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/error.hpp"
#include "core/text_table.hpp"

namespace aisp {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr CheckVerdict k_all_verdicts[] = {CheckVerdict::pass, CheckVerdict::regressed,
                                           CheckVerdict::improved, CheckVerdict::inconclusive,
                                           CheckVerdict::not_comparable};

std::string axes_text(const AxisValues& axes) {
  const std::string out = format_axes(axes, " ");
  return out.empty() ? "none" : out;
}

// Which hardware keys a ladder folder holds expectations for (file names only: a corrupt file still
// counts).
std::vector<std::string> stored_hardware_keys(const std::string& folder) {
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "expectations_", suffix = ".json";
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      keys.push_back(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Why the stored expectations cannot be compared with this target at all ("" when they can).
std::string target_mismatch(const Expectations& e, const TargetResult& t, const std::string& hw) {
  if (e.hardware_key != hw)
    return fmt::format("expectations are for hardware {}, this run is on {}", e.hardware_key, hw);
  if (e.target != t.name)
    return fmt::format("expectations file is for target {}", e.target);
  if (e.mode != to_string(t.mode)) {
    return fmt::format("this run is in {} mode, the expectations were measured in {} mode",
                       to_string(t.mode), e.mode);
  }
  if (e.clock != to_string(t.clock)) {
    return fmt::format("this run uses the {} clock, the expectations the {} clock",
                       to_string(t.clock), e.clock);
  }
  if (e.axes != t.axes) {
    return fmt::format("other axes: this run has {}, the expectations {}", axes_text(t.axes),
                       axes_text(e.axes));
  }
  return {};
}

std::string percent(double fraction) {
  return fmt::format("{:+.1f}%", 100 * fraction);
}

} // namespace

std::string_view to_string(CheckVerdict v) {
  switch (v) {
  case CheckVerdict::pass:
    return "PASS";
  case CheckVerdict::regressed:
    return "REGRESSED";
  case CheckVerdict::improved:
    return "IMPROVED";
  case CheckVerdict::inconclusive:
    return "INCONCLUSIVE";
  case CheckVerdict::not_comparable:
    return "NOT-COMPARABLE";
  }
  return "NOT-COMPARABLE";
}

Judgement judge(const TimedMedian& expected, const TimedMedian& measured, double threshold) {
  if (!(expected.median_ms > 0) || !(measured.median_ms > 0)) {
    throw std::invalid_argument("judge: medians must be positive");
  }
  if (!(threshold >= 0))
    throw std::invalid_argument("judge: threshold must be >= 0");
  // The widest side of each (possibly asymmetric) distribution-free interval, relative to its
  // median.
  const auto half = [](const TimedMedian& t) {
    return std::max({t.median_ms - t.low_ms, t.high_ms - t.median_ms, 0.0}) / t.median_ms;
  };
  Judgement j;
  j.change = measured.median_ms / expected.median_ms - 1.0;
  j.combined = std::hypot(half(expected), half(measured));
  j.limit = std::max(threshold, j.combined);
  // Ratios of round numbers are not exact in binary: a change of exactly the threshold must not
  // flip.
  constexpr double eps = 1e-9;
  if (j.change > j.limit + eps) {
    j.verdict = CheckVerdict::regressed;
  } else if (j.change < -j.limit - eps) {
    j.verdict = CheckVerdict::improved;
  } else if (std::fabs(j.change) + j.combined <= threshold + eps) {
    j.verdict = CheckVerdict::pass;
  } else {
    j.verdict = CheckVerdict::inconclusive;
  }
  return j;
}

bool CheckReport::has_sweeps() const {
  for (const auto& a : rows) {
    for (const auto& b : rows) {
      if (a.target == b.target && a.axes != b.axes)
        return true;
    }
  }
  return false;
}

std::size_t CheckReport::count(CheckVerdict v) const {
  return static_cast<std::size_t>(
      std::count_if(rows.begin(), rows.end(), [&](const CheckRow& r) { return r.verdict == v; }));
}

CheckReport check_run(const LoadedRun& run, const std::string& chapters_dir,
                      const std::vector<std::string>& selectors, double threshold) {
  CheckReport report;
  report.run_dir = run.dir;
  report.hardware_key = run.results.hardware_key;
  report.threshold = threshold;
  const std::string& hw = run.results.hardware_key;
  std::vector<std::string> names; // targets checked, in run order
  for (const auto& t : run.results.targets) {
    if (!selector_matches(t.name, selectors))
      continue;
    if (std::find(names.begin(), names.end(), t.name) == names.end())
      names.push_back(t.name);
    std::optional<std::vector<Expectations>> file;
    const Expectations* stored = nullptr;
    std::string unusable; // why the whole point is NOT-COMPARABLE
    std::string path;
    try {
      path = expectations_path(chapters_dir, t.name, hw);
      file = read_expectations(path);
      if (!file) {
        const auto keys = stored_hardware_keys(fs::path(path).parent_path().string());
        unusable = keys.empty()
                       ? fmt::format(
                             "no expectations file {} (write one with: aisp bench run --targets {} "
                             "--update-expectations)",
                             path, t.name)
                       : fmt::format("no expectations for hardware {} (stored for: {})", hw,
                                     fmt::join(keys, ", "));
      } else {
        stored = find_configuration(*file, std::string(to_string(t.mode)), std::string(to_string(t.clock)), t.axes);
        if (!stored && file->size() == 1) {
          unusable = target_mismatch(file->front(), t, hw); // the reasons of a one-configuration file
        } else if (!stored) {
          std::vector<std::string> held;
          for (const auto& e : *file)
            held.push_back("(" + configuration_text(e.mode, e.clock, e.axes) + ")");
          unusable = fmt::format("no stored configuration ({}); stored: {}",
                                 configuration_text(std::string(to_string(t.mode)),
                                                    std::string(to_string(t.clock)), t.axes),
                                 fmt::join(held, ", "));
        } else {
          unusable = target_mismatch(*stored, t, hw);
        }
      }
    } catch (
        const std::exception& e) { // no ladder folder (UsageError) or an untrusted file (DataError)
      unusable = e.what();
    }
    for (const auto& v : t.variants) {
      if (!selector_matches(v.name, selectors))
        continue;
      CheckRow row{t.name, v.name, t.axes};
      const VariantExpectation* e = stored && unusable.empty() ? stored->find(v.name) : nullptr;
      if (e)
        row.expected_ms = e->median_ms;
      if (v.verdict == Verdict::pass && v.stats)
        row.measured_ms = v.stats->median;
      if (!unusable.empty()) {
        row.reason = unusable;
      } else if (v.verdict != Verdict::pass || !v.stats) {
        row.reason = fmt::format("the variant is {} in this run{}", to_string(v.verdict),
                                 v.reason.empty() ? "" : ": " + v.reason);
      } else if (!e) {
        row.reason = "no stored expectation for this variant";
      } else {
        const auto& s = *v.stats;
        const Judgement j = judge({e->median_ms, e->ci_low_ms, e->ci_high_ms},
                                  {s.median, s.median_ci.low, s.median_ci.high}, threshold);
        row.verdict = j.verdict;
        row.judgement = j;
        switch (j.verdict) {
        case CheckVerdict::pass:
          break;
        case CheckVerdict::regressed:
          row.reason =
              fmt::format("slower by {} (limit {:.1f}%)", percent(j.change), 100 * j.limit);
          break;
        case CheckVerdict::improved:
          row.reason = fmt::format("faster by {:.1f}%: the expectation is stale (update it with "
                                   "--update-expectations)",
                                   -100 * j.change);
          break;
        default:
          row.reason = fmt::format("change {} +-{:.1f}% reaches past the threshold {:.1f}%",
                                   percent(j.change), 100 * j.combined, 100 * threshold);
        }
      }
      report.rows.push_back(std::move(row));
    }
    if (!stored || !unusable.empty())
      continue;
    // (stored is this point's configuration)
    for (const auto& e : stored->variants) {
      if (!selector_matches(e.name, selectors))
        continue;
      const bool measured = std::any_of(t.variants.begin(), t.variants.end(),
                                        [&](const VariantResult& v) { return v.name == e.name; });
      if (measured)
        continue;
      CheckRow row{t.name, e.name, t.axes};
      row.expected_ms = e.median_ms;
      row.reason = "stored in the expectations but not measured in this run";
      report.rows.push_back(std::move(row));
    }
  }
  for (const auto& name : names) {
    std::optional<std::vector<Expectations>> file;
    try {
      file = read_expectations(expectations_path(chapters_dir, name, hw));
    } catch (const std::exception&) {
      continue; // already reported on the rows
    }
    if (!file)
      continue;
    for (const auto& e : *file) {
      const bool measured = std::any_of(run.results.targets.begin(), run.results.targets.end(), [&](const TargetResult& t) {
        return t.name == name && to_string(t.mode) == e.mode && to_string(t.clock) == e.clock && t.axes == e.axes;
      });
      if (!measured) {
        report.notes.push_back(fmt::format("{}: the stored configuration ({}) was not measured in this run", name,
                                           configuration_text(e.mode, e.clock, e.axes)));
      }
    }
  }
  return report;
}

std::string render_check(const CheckReport& report, OutputFormat f) {
  if (f == OutputFormat::json) {
    ojson rows = ojson::array();
    for (const auto& r : report.rows) {
      ojson row{{"target", r.target},
                {"axes", r.axes},
                {"variant", r.variant},
                {"verdict", to_string(r.verdict)},
                {"reason", r.reason},
                {"expected_ms", r.expected_ms ? ojson(*r.expected_ms) : ojson(nullptr)},
                {"measured_ms", r.measured_ms ? ojson(*r.measured_ms) : ojson(nullptr)},
                {"change", r.judgement ? ojson(r.judgement->change) : ojson(nullptr)},
                {"combined_interval", r.judgement ? ojson(r.judgement->combined) : ojson(nullptr)},
                {"limit", r.judgement ? ojson(r.judgement->limit) : ojson(nullptr)}};
      rows.push_back(std::move(row));
    }
    ojson summary = ojson::object();
    for (auto v : k_all_verdicts)
      summary[std::string(to_string(v))] = report.count(v);
    return ojson{{"schema", "aisp.check"},
                 {"schema_version", 1},
                 {"run", report.run_dir},
                 {"hardware_key", report.hardware_key},
                 {"threshold", report.threshold},
                 {"summary", summary},
                 {"rows", rows},
                 {"notes", report.notes}}
               .dump(2) +
           "\n";
  }
  TextTable table{{"variant", "expected", "measured", "change [+-combined interval]", "limit",
                   "verdict", "reason"},
                  {}};
  const bool sweeps = report.has_sweeps();
  for (const auto& r : report.rows) {
    const auto& j = r.judgement;
    table.rows.push_back(
        {sweeps && !r.axes.empty() ? r.variant + " [" + format_axes(r.axes, " ") + "]" : r.variant, r.expected_ms ? format_duration_ms(*r.expected_ms) : "-",
         r.measured_ms ? format_duration_ms(*r.measured_ms) : "-",
         j ? fmt::format("{} +-{:.1f}%", percent(j->change), 100 * j->combined) : "-",
         j ? fmt::format("{:.1f}%", 100 * j->limit) : "-", std::string(to_string(r.verdict)),
         r.reason});
  }
  std::string out = render_text_table(table, f);
  if (f == OutputFormat::csv)
    return out;
  std::vector<std::string> counts;
  for (auto v : k_all_verdicts)
    counts.push_back(fmt::format("{} {}", report.count(v), to_string(v)));
  for (const auto& n : report.notes)
    out += (f == OutputFormat::markdown ? "\nnote: " : "note: ") + n + "\n";
  out += fmt::format("{}check of {} on {}: {} (threshold {:.1f}%)\n",
                     f == OutputFormat::markdown ? "\n" : "", report.run_dir, report.hardware_key,
                     fmt::join(counts, ", "), 100 * report.threshold);
  return out;
}

ExitCode check_exit_code(const CheckReport& report, bool strict) {
  if (report.count(CheckVerdict::regressed) > 0)
    return ExitCode::regression;
  if (strict && (report.count(CheckVerdict::inconclusive) > 0 ||
                 report.count(CheckVerdict::not_comparable) > 0)) {
    return ExitCode::regression;
  }
  return ExitCode::ok;
}

} // namespace aisp
