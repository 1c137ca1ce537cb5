#include "core/results/expectations_check.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/base/error.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// The verdicts counted row by row in the summary; MACHINE-DRIFT is counted by drifted point.
constexpr CheckVerdict k_row_verdicts[] = {CheckVerdict::pass, CheckVerdict::regressed,
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
  if (e.mode != configuration_mode(t)) {
    return fmt::format("this run is in {} mode, the expectations were measured in {} mode",
                       configuration_mode(t), e.mode);
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
  // Rounded first, so that a change of -0.01% prints as +0.0%, not -0.0%.
  const double tenths = std::round(1000 * fraction);
  return fmt::format("{:+.1f}%", tenths == 0 ? 0.0 : tenths / 10);
}

// "vendor_cublas" of "ch10:hgemm:vendor_cublas": enough within a row of its own target.
std::string short_name(const std::string& variant) {
  const auto colon = variant.rfind(':');
  return colon == std::string::npos ? variant : variant.substr(colon + 1);
}

TimedMedian timed(const stats::Summary& s) { return {s.median, s.median_ci.low, s.median_ci.high}; }

TimedMedian timed(const VariantExpectation& e) { return {e.median_ms, e.ci_low_ms, e.ci_high_ms}; }

// "slower by +99.8% (limit 3.0%)", ...: why a judgement gave its verdict. `against` names the
// vendor when the judgement is of the ratio to it.
std::string judgement_reason(const Judgement& j, double threshold, const std::string& against) {
  const std::string rel = against.empty() ? "" : " relative to " + against;
  switch (j.verdict) {
  case CheckVerdict::pass:
    return against.empty() ? ""
                           : fmt::format("relative to {}: {} +-{:.1f}%", against, percent(j.change),
                                         100 * j.combined);
  case CheckVerdict::regressed:
    return fmt::format("slower{} by {} (limit {:.1f}%)", rel, percent(j.change), 100 * j.limit);
  case CheckVerdict::improved:
    return fmt::format("faster{} by {:.1f}%: the expectation is stale (update it with "
                       "--update-expectations)",
                       rel, -100 * j.change);
  default:
    return fmt::format("{}change {} +-{:.1f}% reaches past the threshold {:.1f}%",
                       against.empty() ? "" : "relative to " + against + ": ", percent(j.change),
                       100 * j.combined, 100 * threshold);
  }
}

// This run's vendor reference of a point, when it passed: the one the target names, else (an older
// results file) the variant of kind vendor.
const VariantResult* passing_vendor(const TargetResult& t) {
  for (const auto& v : t.variants) {
    const bool vendor = t.vendor.empty() ? v.kind == VariantKind::vendor : v.name == t.vendor;
    if (vendor && v.verdict == Verdict::pass && v.stats)
      return &v;
  }
  return nullptr;
}

// A point whose vendor moved beyond the limit: both vendor entries, and the vendor's judgement.
struct PointDrift {
  const VariantResult* vendor = nullptr;
  const VariantExpectation* stored_vendor = nullptr;
  Judgement judgement;
};

std::optional<PointDrift> find_drift(const TargetResult& t, const Expectations& stored,
                                     double threshold) {
  const VariantResult* vendor = passing_vendor(t);
  const VariantExpectation* e = vendor ? stored.find(vendor->name) : nullptr;
  if (!e)
    return std::nullopt; // no vendor to tell the machine by: every variant is judged on its own
  const Judgement j = judge(timed(*e), timed(*vendor->stats), threshold);
  if (j.verdict != CheckVerdict::regressed && j.verdict != CheckVerdict::improved)
    return std::nullopt;
  return PointDrift{vendor, e, j};
}

// The vendor's move can be its library's rather than the machine's when the CUDA versions differ.
std::string drift_caveat(const RunProvenance& run, const ExpectationProvenance& stored) {
  std::vector<std::string> differ;
  if (run.runtime_version != 0 && stored.runtime != 0 && run.runtime_version != stored.runtime)
    differ.push_back(
        fmt::format("CUDA runtime {} stored, {} here", stored.runtime, run.runtime_version));
  if (run.driver_version != 0 && stored.driver != 0 && run.driver_version != stored.driver)
    differ.push_back(fmt::format("driver {} stored, {} here", stored.driver, run.driver_version));
  if (differ.empty())
    return {};
  return fmt::format("{}: the vendor library may have moved too", fmt::join(differ, ", "));
}

// The drift in words: "vendor_cublas +7.3% slower than stored{interval}: the machine, not the
// code; {judged} relative to it".
std::string drift_text(const std::string& vendor, const Judgement& j, const std::string& interval,
                       const std::string& judged, const std::string& caveat) {
  const std::string moved = j.change > 0 ? fmt::format("{} slower", percent(j.change))
                                         : fmt::format("{:.1f}% faster", -100 * j.change);
  return fmt::format("{} {} than stored{}: the machine, not the code; {} relative to it{}",
                     short_name(vendor), moved, interval, judged,
                     caveat.empty() ? "" : " (" + caveat + ")");
}

// A variant of a drifted point, judged by its ratio to the vendor: stored (the entry's own fraction
// of vendor, else the two stored medians when one run measured both) against this run's. nullopt,
// with `why_not` set, when there is no stored ratio to trust.
std::optional<Judgement> judge_relative(const VariantResult& v, const VariantExpectation& e,
                                        const PointDrift& d, double threshold,
                                        std::string& why_not) {
  std::optional<TimedMedian> stored;
  if (e.fraction_of_vendor) {
    const auto& f = *e.fraction_of_vendor;
    stored = ratio_from_fraction(f.value, f.low, f.high);
  }
  // Medians stored by two runs may come from two machines: their ratio would carry the drift in.
  if (!stored && e.provenance.run_id == d.stored_vendor->provenance.run_id)
    stored = ratio_to_vendor(timed(e), timed(*d.stored_vendor));
  if (!stored) {
    why_not = fmt::format(
        "{} drifted (MACHINE-DRIFT) and the stored entries of this variant ({}) and of the vendor "
        "({}) come from different runs, with no ratio measured between them: store both from one "
        "run (aisp bench run --update-expectations)",
        short_name(d.vendor->name), e.provenance.run_id, d.stored_vendor->provenance.run_id);
    return std::nullopt;
  }
  std::optional<TimedMedian> now;
  if (v.fraction_of_vendor && v.fraction_of_vendor->against == d.vendor->name) {
    const auto& f = *v.fraction_of_vendor;
    now = ratio_from_fraction(f.value, f.low, f.high);
  }
  if (!now)
    now = ratio_to_vendor(timed(*v.stats), timed(*d.vendor->stats));
  return judge(*stored, *now, threshold);
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
  case CheckVerdict::machine_drift:
    return "MACHINE-DRIFT";
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

TimedMedian ratio_to_vendor(const TimedMedian& variant, const TimedMedian& vendor) {
  if (!(variant.median_ms > 0) || !(vendor.median_ms > 0))
    throw std::invalid_argument("ratio_to_vendor: medians must be positive");
  const auto half = [](const TimedMedian& t) {
    return std::max({t.median_ms - t.low_ms, t.high_ms - t.median_ms, 0.0}) / t.median_ms;
  };
  const double q = variant.median_ms / vendor.median_ms;
  const double h = std::hypot(half(variant), half(vendor));
  return {q, q * (1 - h), q * (1 + h)};
}

std::optional<TimedMedian> ratio_from_fraction(double value, double low, double high) {
  if (!(low > 0) || !(low <= value) || !(value <= high))
    return std::nullopt;
  // time(variant) / time(vendor) = 1 / fraction: the interval's ends swap.
  return TimedMedian{1 / value, 1 / high, 1 / low};
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

std::size_t CheckReport::failing_in_run() const {
  return static_cast<std::size_t>(std::count_if(rows.begin(), rows.end(), [](const CheckRow& r) {
    return r.run_verdict && is_failing(*r.run_verdict);
  }));
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
        stored = find_configuration(*file, configuration_mode(t), std::string(to_string(t.clock)), t.axes);
        if (!stored && file->size() == 1) {
          unusable = target_mismatch(file->front(), t, hw); // the reasons of a one-configuration file
        } else if (!stored) {
          std::vector<std::string> held;
          for (const auto& e : *file)
            held.push_back("(" + configuration_text(e.mode, e.clock, e.axes) + ")");
          unusable = fmt::format("no stored configuration ({}); stored: {}",
                                 configuration_text(configuration_mode(t),
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
    const std::optional<PointDrift> drift =
        stored && unusable.empty() ? find_drift(t, *stored, threshold) : std::nullopt;
    std::size_t judged_relative = 0;
    for (const auto& v : t.variants) {
      if (!selector_matches(v.name, selectors))
        continue;
      CheckRow row{t.name, v.name, t.axes};
      row.run_verdict = v.verdict;
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
      } else if (drift && &v == drift->vendor) {
        row.verdict = CheckVerdict::machine_drift;
        row.judgement = drift->judgement;
        row.reason = drift_text(v.name, drift->judgement, "", "variants judged",
                                drift_caveat(run.provenance, drift->stored_vendor->provenance));
      } else if (drift) {
        const Judgement own = judge(timed(*e), timed(*v.stats), threshold);
        row.absolute = own;
        std::string why_not;
        if (const auto j = judge_relative(v, *e, *drift, threshold, why_not)) {
          const std::string vendor = short_name(drift->vendor->name);
          row.verdict = j->verdict;
          row.judgement = j;
          row.judged_against = drift->vendor->name;
          row.reason = fmt::format("{} (its own change {}, the vendor's {})",
                                   judgement_reason(*j, threshold, vendor), percent(own.change),
                                   percent(drift->judgement.change));
          ++judged_relative;
        } else {
          row.reason = why_not;
        }
      } else {
        const Judgement j = judge(timed(*e), timed(*v.stats), threshold);
        row.verdict = j.verdict;
        row.judgement = j;
        row.reason = judgement_reason(j, threshold, "");
      }
      report.rows.push_back(std::move(row));
    }
    if (drift) {
      report.drifts.push_back({t.name, t.axes, drift->vendor->name, drift->judgement,
                               judged_relative,
                               drift_caveat(run.provenance, drift->stored_vendor->provenance)});
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
        return t.name == name && configuration_mode(t) == e.mode && to_string(t.clock) == e.clock && t.axes == e.axes;
      });
      if (!measured) {
        report.notes.push_back(fmt::format("{}: the stored configuration ({}) was not measured in this run", name,
                                           configuration_text(e.mode, e.clock, e.axes)));
      }
    }
  }
  return report;
}

namespace {

std::string drift_line(const MachineDrift& d) {
  const std::string at = d.axes.empty() ? "" : " [" + format_axes(d.axes, " ") + "]";
  const std::string interval = fmt::format(" (+-{:.1f}%, limit {:.1f}%)",
                                           100 * d.judgement.combined, 100 * d.judgement.limit);
  const std::string judged = fmt::format("{} variant{} judged", d.judged_relative,
                                         d.judged_relative == 1 ? "" : "s");
  return fmt::format("{}{}: {}", d.target, at,
                     drift_text(d.vendor, d.judgement, interval, judged, d.caveat));
}

ojson row_json(const CheckRow& r) {
  const auto number = [](const std::optional<double>& x) { return x ? ojson(*x) : ojson(nullptr); };
  const auto& j = r.judgement;
  return ojson{
      {"target", r.target},
      {"axes", r.axes},
      {"variant", r.variant},
      {"verdict", to_string(r.verdict)},
      {"reason", r.reason},
      {"run_verdict", r.run_verdict ? ojson(to_string(*r.run_verdict)) : ojson(nullptr)},
      {"expected_ms", number(r.expected_ms)},
      {"measured_ms", number(r.measured_ms)},
      {"change", j ? ojson(j->change) : ojson(nullptr)},
      {"combined_interval", j ? ojson(j->combined) : ojson(nullptr)},
      {"limit", j ? ojson(j->limit) : ojson(nullptr)},
      {"judged_against", r.judged_against.empty() ? ojson(nullptr) : ojson(r.judged_against)},
      {"absolute_change", r.absolute ? ojson(r.absolute->change) : ojson(nullptr)}};
}

} // namespace

std::string render_check(const CheckReport& report, OutputFormat f) {
  if (f == OutputFormat::json) {
    ojson rows = ojson::array();
    for (const auto& r : report.rows)
      rows.push_back(row_json(r));
    ojson summary = ojson::object();
    for (auto v : k_row_verdicts)
      summary[std::string(to_string(v))] = report.count(v);
    summary[std::string(to_string(CheckVerdict::machine_drift))] = report.drifts.size();
    ojson drifts = ojson::array();
    for (const auto& d : report.drifts) {
      drifts.push_back(ojson{{"target", d.target},
                             {"axes", d.axes},
                             {"vendor", d.vendor},
                             {"change", d.judgement.change},
                             {"combined_interval", d.judgement.combined},
                             {"limit", d.judgement.limit},
                             {"judged_relative", d.judged_relative},
                             {"caveat", d.caveat}});
    }
    return ojson{{"schema", "aisp.check"},
                 {"schema_version", 2},
                 {"run", report.run_dir},
                 {"hardware_key", report.hardware_key},
                 {"threshold", report.threshold},
                 {"strict", report.strict},
                 {"summary", summary},
                 {"failing_in_run", report.failing_in_run()},
                 {"exit_code", static_cast<int>(check_exit_code(report, report.strict))},
                 {"outcome", check_outcome(report, report.strict)},
                 {"drift", drifts},
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
    // A row judged relative to its vendor shows the change of its ratio to the vendor.
    const std::string vs = r.judged_against.empty() ? "" : " vs vendor";
    table.rows.push_back(
        {sweeps && !r.axes.empty() ? r.variant + " [" + format_axes(r.axes, " ") + "]" : r.variant,
         r.expected_ms ? format_duration_ms(*r.expected_ms) : "-",
         r.measured_ms ? format_duration_ms(*r.measured_ms) : "-",
         j ? fmt::format("{} +-{:.1f}%{}", percent(j->change), 100 * j->combined, vs) : "-",
         j ? fmt::format("{:.1f}%", 100 * j->limit) : "-", std::string(to_string(r.verdict)),
         r.reason});
  }
  std::string out = render_text_table(table, f);
  if (f == OutputFormat::csv)
    return out;
  const std::string gap = f == OutputFormat::markdown ? "\n" : "";
  std::vector<std::string> counts;
  for (auto v : k_row_verdicts)
    counts.push_back(fmt::format("{} {}", report.count(v), to_string(v)));
  counts.push_back(
      fmt::format("{} {}", report.drifts.size(), to_string(CheckVerdict::machine_drift)));
  for (const auto& d : report.drifts)
    out += gap + "drift: " + drift_line(d) + "\n";
  for (const auto& n : report.notes)
    out += gap + "note: " + n + "\n";
  out += fmt::format("{}check of {} on {}: {} (threshold {:.1f}%)\n", gap, report.run_dir,
                     report.hardware_key, fmt::join(counts, ", "), 100 * report.threshold);
  out += gap + check_outcome(report, report.strict) + "\n";
  return out;
}

ExitCode check_exit_code(const CheckReport& report, bool strict) {
  if (report.failing_in_run() > 0)
    return ExitCode::verdict_failure;
  if (report.count(CheckVerdict::regressed) > 0)
    return ExitCode::regression;
  if (strict && (report.count(CheckVerdict::inconclusive) > 0 ||
                 report.count(CheckVerdict::not_comparable) > 0)) {
    return ExitCode::regression;
  }
  if (!report.drifts.empty())
    return k_exit_machine_drift;
  return ExitCode::ok;
}

std::string check_outcome(const CheckReport& report, bool strict) {
  std::vector<std::string> found; // every finding that sets an exit code, highest first
  std::vector<std::string> failing;
  for (const Verdict v : {Verdict::fail, Verdict::invalid, Verdict::implausible, Verdict::error}) {
    const auto n = std::count_if(report.rows.begin(), report.rows.end(),
                                 [&](const CheckRow& r) { return r.run_verdict == v; });
    if (n > 0)
      failing.push_back(fmt::format("{} {}", n, to_string(v)));
  }
  if (!failing.empty()) {
    found.push_back(fmt::format("{} in this run (a wrong answer outranks a slow one)",
                                fmt::join(failing, ", ")));
  }
  if (const auto n = report.count(CheckVerdict::regressed); n > 0)
    found.push_back(fmt::format("{} REGRESSED", n));
  const auto inconclusive = report.count(CheckVerdict::inconclusive);
  const auto not_comparable = report.count(CheckVerdict::not_comparable);
  if (strict && inconclusive + not_comparable > 0) {
    found.push_back(
        fmt::format("--strict: {} INCONCLUSIVE, {} NOT-COMPARABLE", inconclusive, not_comparable));
  }
  if (const auto n = report.drifts.size(); n > 0) {
    found.push_back(
        fmt::format("MACHINE-DRIFT at {} point{} (its variants judged relative to the vendor)", n,
                    n == 1 ? "" : "s"));
  }
  const int code = static_cast<int>(check_exit_code(report, strict));
  if (found.empty())
    return fmt::format("exit {}: no regression", code);
  return fmt::format("exit {}: {}", code, fmt::join(found, "; "));
}

} // namespace aisp
