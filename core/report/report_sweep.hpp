// The sweep chart of the HTML report: one line per variant across a ladder's sweep points (x = the
// swept axis, y = the ladder's figure of merit), and the one roofline that holds every point of a
// ladder whose points differ in arithmetic intensity (ch09:intensity). The renderer takes plain
// structs; its output is deterministic text (fixed precision).
#pragma once

#include <string>
#include <vector>

#include "core/report/report_summary.hpp"
#include "core/results/roofline.hpp"

namespace aisp {

struct SweepPoint {
  double x = 0;
  double y = 0;
  std::string note; // hover text: "04_persistent at size=8192: 1161 TFLOP/s (0.947 ms)"
  std::string label; // shown beside the marker when not empty ("16/s": the serving curve's load)
};

struct SweepSeries {
  std::string label; // "04_persistent"
  std::string kind;  // "baseline", "step", "optimized" or "vendor" (vendor lines are dashed)
  std::string colour; // "#4e79a7": one per variant of the ladder, the same in all its charts
  std::vector<SweepPoint> points; // PASS points only, in x order
};

struct SweepChart {
  std::string title;
  std::string x_label; // the swept axis' name
  std::string y_label; // "achieved TFLOP/s", "achieved GB/s" or "median time (ms)"
  bool x_log = false;  // log2 axis
  bool y_log = false;  // log10 axis
  std::vector<double> x_values; // every point's x (ticks), sorted
  std::vector<SweepSeries> series;
  std::vector<std::string> not_drawn; // variants without a PASS point: "02_x (SKIPPED)"
};

// The charts of one swept ladder (group.swept_axes not empty). x is the swept axis with the most
// values (on a tie: the one whose values are all positive and span the widest ratio, such as a size;
// then name order); with other swept axes, one chart per combination of their values, titled by it (the
// group's partial axes count among them, a point lacking one being a value of its own).
// y is TFLOP/s when every point declares FLOPs and at least half declare more FLOPs than bytes, else GB/s when every point declares
// bytes, else the median time. An axis is logarithmic when its values are positive and either all
// powers of two or spread over more than 8x.
std::vector<SweepChart> sweep_charts_of(const LadderGroup& group);

// An <svg class="aisp-sweep"> element: one <polyline> and one marker (with its hover title) per
// point of each series, a legend on the right naming every series and the variants not drawn.
std::string render_sweep_svg(const SweepChart& chart);

// True when the ladder's points differ in declared arithmetic intensity (FLOPs per byte) by more
// than 1%: then its report draws one roofline with all of them.
bool intensity_differs(const LadderGroup& group);

// One roofline with every placed variant of every point of the ladder, labelled "stem axes".
roofline::Chart ladder_roofline_of(const RunResults& run, const LadderGroup& group);

} // namespace aisp
