// Progress of `aisp bench run` on stderr: on a terminal, a live status line (target, variant,
// phase, samples so far, ETA) below the lasting lines (verdicts, notes); elsewhere, as in CI logs,
// the plain line-per-event output of the orchestrator, unchanged.
#pragma once

#include "device/orchestrator.hpp"

namespace aisp::cli {

// run_benchmarks(options, std::cerr) with the display above. Live only when stderr is a terminal
// and TERM is not "dumb"; the status line is cleared before this returns or throws.
RunOutcome run_with_progress(RunOptions options);

} // namespace aisp::cli
