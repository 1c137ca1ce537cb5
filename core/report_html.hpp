// The HTML report of a run: one self-contained page (inline CSS and SVG; no scripts, no network: a
// Content-Security-Policy forbids both) with, per target, the ladder's bar chart, a roofline when
// the results carry ceilings, the speedup table with intervals, the verdicts, and the manifest.
#pragma once

#include <string>

#include "core/report_charts.hpp"
#include "core/roofline.hpp"
#include "core/run_folder.hpp"

namespace aisp {

// The charts of one target, built from a run (the renderers themselves take only plain structs).
// The roofline is core/roofline.hpp's, fed with this target alone.
LadderChart ladder_chart_of(const TargetResult& t);
roofline::Chart roofline_of(const LoadedRun& run, const TargetResult& t);

std::string render_html_report(const LoadedRun& run);

} // namespace aisp
