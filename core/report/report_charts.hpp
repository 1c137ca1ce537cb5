// The ladder bar chart of the HTML report (the roofline is core/results/roofline.hpp's). It takes plain
// structs (no results types), so any source of numbers can feed it; its output is deterministic
// text (fixed precision), fit for golden files.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aisp {

// One variant of a ladder: a bar of its median time (with the median's interval as a whisker) and a
// bar of its percent of the ceiling (or, without ceilings, of its throughput).
struct LadderBar {
  std::string label;   // "03_vectorized"
  std::string kind;    // "baseline", "step", "optimized" or "vendor" (vendor bars are marked)
  std::string verdict; // "PASS", or another verdict: then no bar, the verdict and reason instead
  std::string reason;
  std::optional<double> median_ms, ci_low_ms, ci_high_ms;
  std::optional<double> percent_of_ceiling;
  double throughput = 0; // in LadderChart::throughput_unit
};

struct LadderChart {
  std::string title;
  std::string ceiling;         // name of the ceiling the percentages are of ("" when unnamed)
  std::string throughput_unit; // "GB/s" or "TFLOP/s"
  std::vector<LadderBar> bars;
};

// Axis ticks at 1, 2 or 5 times a power of ten, at most about six of them, covering [0, max] (the
// last tick is at or above max). {0, 1} for a max that is not positive.
std::vector<double> nice_ticks(double max);

// An <svg class="aisp-ladder"> element: time panel on the left; % of ceiling panel on the right
// when any bar has one, else a throughput panel.
std::string render_ladder_svg(const LadderChart& chart);

} // namespace aisp
