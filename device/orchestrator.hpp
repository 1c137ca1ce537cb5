// The parent side of `aisp bench run`: resolves the selection, starts one worker process per target
// (re-executing this binary), survives workers that crash or hang, and writes the run's artifacts.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/measure/progress.hpp"
#include "core/base/registry.hpp"
#include "core/results/results.hpp"
#include "core/measure/stopping.hpp"

namespace aisp {

class NoDeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunOptions {
  std::vector<std::string> selectors;  // empty = every visible target
  std::vector<std::pair<std::string, std::int64_t>> axis_overrides;  // one value per axis
  // Axes measured at several values (`--axis n=1Mi,16Mi`), applied after axis_overrides (a later request
  // for the same axis wins). A target runs once per point of the product of its axes' values: the values
  // asked for here, else an axis' default_sweep, else its default (core/base/axes.hpp expand_axis_points).
  std::vector<AxisRequest> axis_sweeps;
  std::optional<CacheMode> mode;       // unset = each target's default
  L2Flush l2_flush = L2Flush::read;    // cold mode's flush (AISP_L2_FLUSH, read by the CLI)
  int device = 0;
  int warmup_launches = 3;
  StoppingRule rule;
  // rule.max_time_s came from the user (--max-time): then it applies to every target as given; otherwise a
  // ladder may raise it for its own variants (TargetInfo::sampling_budget_s).
  bool max_time_given = false;
  double timeout_s = 120;              // a worker silent this long is killed; its variant is ERROR
  std::string out_root = "artifacts/runs";
  std::string label;                   // run folder suffix; default from the selectors
  bool include_hidden = false;
  bool audit = true;                   // off only to measure the audit's own cost
  // Test-only switches (tests/gpu/test_cheats.cpp shows with them that each cheat gets past every other
  // check): no CLI option turns these off. See HarnessConfig.
  bool audit_timed = true;
  bool mask_references = true;
  bool fresh_inputs = true;
  bool ceilings = true;                // place results against the measured ceilings, physics check
  std::string peaks_dir = "artifacts/peaks";  // the ceilings cache (aisp hw peaks)
  double peaks_timeout_s = 900;        // for measuring what the cache lacks, on first use
  std::vector<std::string> argv;       // recorded in the manifest
  // Optional structured progress for a live display (cli/progress_display.cpp), called on the calling
  // thread for every phase, every timed sample and every verdict; the `progress` stream is written as ever.
  std::function<void(const ProgressEvent&)> on_progress;
};

struct RunOutcome {
  RunResults results;
  std::string run_dir;
};

// The per-variant sampling budget `target` runs under in this run (core/measure/stopping.hpp).
inline double sampling_budget_s(const RunOptions& o, const TargetInfo& target) {
  return sampling_budget_s(o.rule.max_time_s, o.max_time_given, target.sampling_budget_s);
}

// Throws UsageError (bad selection, axes or output folder) and NoDeviceError. `progress` gets one line per
// event (plain text, suitable for logs).
RunOutcome run_benchmarks(const RunOptions& options, std::ostream& progress);

// Checks the selection and axes without touching the GPU (so that bad input fails before anything else).
void check_selection(const RunOptions& options);

// The worker's side: reads a HarnessConfig from stdin, writes JSON lines to `fd`. Returns its exit status.
int worker_main(int fd);

}  // namespace aisp
