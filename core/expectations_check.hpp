// `aisp bench check`: compares a run with the stored expectations, variant by variant. Never skips
// a comparison silently: what cannot be compared is NOT-COMPARABLE with the reason. Rules and
// thresholds: docs/regression-gating.md "Verdicts".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expectations.hpp"
#include "core/render.hpp"
#include "core/run_folder.hpp"
#include "core/verdict.hpp"

namespace aisp {

enum class CheckVerdict { pass, regressed, improved, inconclusive, not_comparable };
std::string_view
to_string(CheckVerdict v); // "PASS", "REGRESSED", "IMPROVED", "INCONCLUSIVE", "NOT-COMPARABLE"

inline constexpr double k_default_check_threshold = 0.03;

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
  std::optional<Judgement> judgement; // present when compared
};

struct CheckReport {
  std::string run_dir;
  std::string hardware_key;
  double threshold = k_default_check_threshold;
  std::vector<CheckRow> rows;
  // Stored configurations of a checked target that this run did not measure (another point of a
  // sweep, another mode): listed, never a verdict, so a run of one point checks cleanly.
  std::vector<std::string> notes;

  std::size_t count(CheckVerdict v) const;
  bool has_sweeps() const; // some target has rows at more than one axis point
};

// Compares every selected variant of `run`, at each axis point, with the stored configuration at the
// same mode, clock and axes of chapters_dir's expectations for the run's hardware key. Stored
// variants of a measured configuration that the run did not measure are reported too
// (NOT-COMPARABLE); a point with no stored configuration is NOT-COMPARABLE with the reason.
CheckReport check_run(const LoadedRun& run, const std::string& chapters_dir,
                      const std::vector<std::string>& selectors, double threshold);

// table, markdown and csv: one row per variant, then (table) a summary line; json: a document with
// "schema": "aisp.check".
std::string render_check(const CheckReport& report, OutputFormat f);

// ExitCode::regression when a variant REGRESSED (or, when strict, was INCONCLUSIVE or
// NOT-COMPARABLE).
ExitCode check_exit_code(const CheckReport& report, bool strict);

} // namespace aisp
