// `aisp bench check`: compares a run with the stored expectations, variant by variant. Never skips
// a comparison silently: what cannot be compared is NOT-COMPARABLE with the reason. When a point's
// vendor reference itself moved beyond the limit, the machine differs from the one the expectations
// describe (MACHINE-DRIFT) and the point's other variants are judged by their ratio to the vendor.
// Rules and thresholds: docs/regression-gating.md "aisp bench check".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/results/expectations.hpp"
#include "core/results/render.hpp"
#include "core/results/run_folder.hpp"
#include "core/measure/verdict.hpp"

namespace aisp {

// machine_drift is the vendor reference's own row when it moved beyond the limit.
enum class CheckVerdict { pass, regressed, improved, inconclusive, not_comparable, machine_drift };
// "PASS", "REGRESSED", "IMPROVED", "INCONCLUSIVE", "NOT-COMPARABLE", "MACHINE-DRIFT"
std::string_view to_string(CheckVerdict v);

inline constexpr double k_default_check_threshold = 0.03;

// `bench check`'s exit code when the only finding is MACHINE-DRIFT (documented in README.md and
// `aisp --help`). It lives here, beside the verdict it reports, rather than in ExitCode
// (core/measure/verdict.hpp), which only `bench check` would use this value of.
inline constexpr ExitCode k_exit_machine_drift = ExitCode::machine_drift;

// A median with its interval, in milliseconds.
struct TimedMedian {
  double median_ms = 0;
  double low_ms = 0;
  double high_ms = 0;
};

struct Judgement {
  CheckVerdict verdict = CheckVerdict::not_comparable;
  double change = 0;   // measured / expected - 1: positive = slower
  double combined = 0; // the two medians' relative interval half-widths, combined in quadrature
  double limit =
      0; // max(threshold, combined): a change beyond it is a regression or an improvement
};

// A variant's time relative to its vendor's (variant / vendor), with an interval: the two medians'
// relative half-widths combined in quadrature (independent measurements; interleaved rounds only
// make the true interval narrower).
TimedMedian ratio_to_vendor(const TimedMedian& variant, const TimedMedian& vendor);
// The same ratio from a stored or measured fraction of vendor (vendor / variant, bootstrap
// interval): its reciprocal. nullopt when the interval is not usable (non-positive, or not
// around the value).
std::optional<TimedMedian> ratio_from_fraction(double value, double low, double high);

// REGRESSED: change > limit. IMPROVED: change < -limit. PASS: |change| + combined <= threshold (the
// whole interval of the change lies within +-threshold). Otherwise INCONCLUSIVE. On an exact
// boundary the milder verdict wins. Throws std::invalid_argument for a non-positive median or a
// negative threshold.
Judgement judge(const TimedMedian& expected, const TimedMedian& measured, double threshold);

struct CheckRow {
  std::string target;
  std::string variant;
  AxisValues axes;                    // the point the variant was measured (or stored) at
  CheckVerdict verdict = CheckVerdict::not_comparable;
  std::string reason;                 // why (always set except for a plain PASS)
  std::optional<double> expected_ms;  // present when a stored expectation was found
  std::optional<double> measured_ms;  // present when the run measured the variant
  std::optional<Judgement> judgement; // present when compared: the judgement that gave the verdict
  std::optional<Verdict> run_verdict; // the variant's verdict in this run; nullopt: not measured
  // Set when the point's vendor drifted: the vendor's name, and `judgement` is of the variant's
  // ratio to it (stored ratio vs this run's); `absolute` is then the variant's own change, for the
  // record.
  std::string judged_against;
  std::optional<Judgement> absolute;
};

// A point whose vendor reference moved beyond the limit against its stored median: the machine
// (or the vendor library) differs from the one the expectations were measured on.
struct MachineDrift {
  std::string target;
  AxisValues axes;
  std::string vendor;              // its variant name
  Judgement judgement;             // the vendor's change against its stored median
  std::size_t judged_relative = 0; // selected variants of the point judged relative to it
  std::string caveat;              // e.g. "the CUDA runtime differs ...", empty when none
};

struct CheckReport {
  std::string run_dir;
  std::string hardware_key;
  double threshold = k_default_check_threshold;
  bool strict = false; // the --strict the check ran under: the rendered outcome line needs it
  std::vector<CheckRow> rows;
  std::vector<MachineDrift> drifts; // one per drifted point, whether or not its vendor was selected
  // Stored configurations of a checked target that this run did not measure (another point of a
  // sweep, another mode): listed, never a verdict, so a run of one point checks cleanly.
  std::vector<std::string> notes;

  std::size_t count(CheckVerdict v) const;
  std::size_t failing_in_run() const; // rows whose variant is FAIL, INVALID, IMPLAUSIBLE or ERROR
  bool has_sweeps() const; // some target has rows at more than one axis point
};

// Compares every selected variant of `run`, at each axis point, with the stored configuration at
// the same mode, clock and axes of chapters_dir's expectations for the run's hardware key. Stored
// variants of a measured configuration that the run did not measure are reported too
// (NOT-COMPARABLE); a point with no stored configuration is NOT-COMPARABLE with the reason. A point
// whose vendor (TargetResult::vendor, PASS here and stored) is REGRESSED or IMPROVED by judge() is
// a MachineDrift: the vendor's row is MACHINE-DRIFT and the other variants are judged by judge() on
// their ratio to the vendor, stored (VariantExpectation::fraction_of_vendor, else the stored
// medians when both entries come from one run) against this run's.
CheckReport check_run(const LoadedRun& run, const std::string& chapters_dir,
                      const std::vector<std::string>& selectors, double threshold);

// table, markdown and csv: one row per variant, then (table, markdown) the drifts, notes, the
// counts line and the outcome line; json: a document with "schema": "aisp.check".
std::string render_check(const CheckReport& report, OutputFormat f);

// In order of precedence: ExitCode::verdict_failure when a checked variant is FAIL, INVALID,
// IMPLAUSIBLE or ERROR in the run (a wrong answer outranks a slow one); ExitCode::regression when
// a variant REGRESSED (or, when strict, was INCONCLUSIVE or NOT-COMPARABLE); k_exit_machine_drift
// when a point drifted; else ExitCode::ok.
ExitCode check_exit_code(const CheckReport& report, bool strict);

// "exit 1: 1 FAIL in this run (a wrong answer outranks a slow one); also 1 REGRESSED": the exit
// code and everything that would have set one, so that no finding hides behind a higher one.
std::string check_outcome(const CheckReport& report, bool strict);

} // namespace aisp
