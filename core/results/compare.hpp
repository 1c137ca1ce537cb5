// `aisp bench compare RUN_A RUN_B`: two stored runs, variant by variant: medians, the speedup of B
// over A with its bootstrap interval (stats::ratio_of_medians on the raw samples), and verdict
// changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/results/render.hpp"
#include "core/results/run_folder.hpp"
#include "core/measure/stats.hpp"

namespace aisp {

struct CompareRow {
  std::string target;
  AxisValues axes; // the point: A's axes (B's for a point only B has)
  std::string variant;
  std::optional<Verdict> verdict_a, verdict_b; // absent: the run did not measure the variant
  std::optional<double> median_a_ms, median_b_ms;
  std::optional<stats::RatioEstimate> speedup; // median(A) / median(B): > 1 means B is faster
  std::string finding; // "B faster", "B slower", "no significant difference", or why not compared
};

struct CompareResult {
  std::string run_a, run_b;          // run ids
  std::vector<std::string> warnings; // other hardware, other mode or axes, ...
  std::vector<CompareRow> rows;
  bool has_sweeps = false; // some target has several axis points in a run: rows then show their axes
};

// Every variant of either run appears once per axis point (those in only one run say so). A variant
// is matched with the same variant of the same target at the same axes; a target that each run
// measured at exactly one point, at different axes, is still compared, with a warning (the old
// behaviour for `--axis n=...` runs). Speedups are computed only between variants with raw samples
// in both runs.
CompareResult compare_runs(const LoadedRun& a, const LoadedRun& b,
                           const std::vector<std::string>& selectors = {});

std::string render_compare(const CompareResult& c, OutputFormat f);

} // namespace aisp
