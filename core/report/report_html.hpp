// The HTML report of a run: one self-contained page (inline CSS and SVG; no scripts, no network: a
// Content-Security-Policy forbids both): a summary table, then per ladder the bar chart, a roofline
// when the results carry ceilings, the speedup table with intervals, the verdicts; the manifest.
#pragma once

#include <string>
#include <vector>

#include "core/report/report_charts.hpp"
#include "core/report/report_serving.hpp"
#include "core/report/report_summary.hpp"
#include "core/results/roofline.hpp"
#include "core/results/run_folder.hpp"

namespace aisp {

// The charts of one target, built from a run (the renderers themselves take only plain structs).
// The roofline is core/results/roofline.hpp's, fed with this target alone.
LadderChart ladder_chart_of(const TargetResult& t);
roofline::Chart roofline_of(const LoadedRun& run, const TargetResult& t);

// The page opens with the summary table (one row per ladder, core/report/report_summary.hpp); a swept
// ladder's section has its sweep charts (core/report/report_sweep.hpp), one roofline with every point when
// their arithmetic intensity differs, and each point's chart and table folded in a <details>. Loadgen
// files given (core/report/report_serving.hpp) add their section before the manifest.
std::string render_html_report(const LoadedRun& run, const ReportOptions& options = {},
                               const std::vector<LoadgenFile>& serving = {});
// A page of loadgen files alone (no run folder): their section and nothing else.
std::string render_html_report(const std::vector<LoadgenFile>& serving);

} // namespace aisp
