// What the reports say about a run at a glance: the run's targets grouped by ladder (a sweep's points
// together), one summary row per ladder, and several run folders merged into one report. Pure
// functions of loaded runs (the expectations column reads the chapters folder), shared by the HTML
// and markdown reports. docs/regression-gating.md "Reports" describes the columns.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/results/run_folder.hpp"

namespace aisp {

// What a report is rendered with beyond the run itself.
struct ReportOptions {
  // Where the stored expectations are read for the summary's "vs stored expectations" column; empty:
  // not read (the column says "not checked").
  std::string chapters_dir;
};

// One ladder of a run: its points (targets of one name) in run order.
struct LadderGroup {
  std::string name; // "ch19:fp8_gemm"
  std::vector<const TargetResult*> points;
  // Axes that every point has, at more than one value, in name order (empty for a single point).
  std::vector<std::string> swept_axes;
  // Axes that only some points have, in name order: an omit_at_default axis (left out at its default), or
  // an axis added after one of the merged runs. Never on a chart's x: each of their values, absence
  // included, gets its own chart, so that points at different values are never drawn on one line.
  std::vector<std::string> partial_axes;
};

// The run's targets grouped by name, in order of first appearance. The groups point into `run`.
std::vector<LadderGroup> group_ladders(const RunResults& run);

// "t-ch19-fp8-gemm": the id of a ladder's section (or, with axes, of one point's details).
std::string report_anchor(const std::string& title);

// A variant's short name within its ladder: "ch07:copy:03_vectorized" -> "03_vectorized".
std::string variant_stem(const std::string& variant, const std::string& target);

struct ValueRange {
  double low = 0;
  double high = 0;
};

// One row of the summary table.
struct LadderSummary {
  std::string ladder;
  std::size_t points = 0;
  // The fastest PASS variant that is not a vendor reference (short name); with several points, the
  // one that is fastest at most of them (on a tie, the one faster at more of the points where both
  // passed, then the later in the ladder). Empty when none passed.
  std::string best;
  std::size_t best_points = 0; // points at which `best` is the fastest
  // Of `best`, over the points where it passed and has the value (min-max):
  std::optional<ValueRange> percent_of_ceiling;  // % of the measured ceiling
  std::optional<ValueRange> fraction_of_vendor;  // vendor median / its median (1 = vendor speed)
  std::optional<ValueRange> speedup_vs_baseline; // baseline median / its median
  std::string verdicts;                          // "14 PASS, 2 SKIPPED" over variants x points
  bool all_pass = false;                         // no verdict other than PASS and SKIPPED
  // "ok", "2 regressed, 1 faster", "no expectations for h100_sxm", "not checked", ...
  std::string expectations = "not checked";
  std::string expectations_detail; // the why behind it, for a hover title ("" when none)
  bool expectations_bad = false;   // something regressed, drifted or could not be read
};

// "8 PASS, 1 FAIL" over every variant of every given point.
std::string verdict_counts(const std::vector<const TargetResult*>& points);

// The summary rows of `run`, one per ladder in group_ladders order; with options.chapters_dir set,
// the expectations column compares the run with the stored expectations there (core/
// expectations_check.hpp, default threshold). Never throws for a missing or unreadable expectations
// file: the column says so.
std::vector<LadderSummary> summarize_ladders(const LoadedRun& run, const ReportOptions& options);

// "66.8%" or "61.2-66.8%"; "1.85x" or "1.41-1.94x": a summary cell ("-" when absent).
std::string format_range(const std::optional<ValueRange>& r, const char* unit, int decimals);

// Several runs of one machine as one run (a curriculum measured by several invocations): targets
// in the order given; a (ladder, mode, axes) point measured by more than one run is taken from the
// last of them and named in `replaced`. The merged run's manifest is {"merged_runs": [{"run_id",
// "created_utc", "dir", "manifest"}, ...]}, its run_id "A + B", its date the earliest, its ceilings
// the first run's that has them (for the roofs), its provenance the first run's. One run is returned as it is. Throws UsageError
// for no runs, or when the hardware keys differ (naming them).
LoadedRun merge_runs(std::vector<LoadedRun> runs, std::vector<std::string>* replaced = nullptr);

} // namespace aisp
