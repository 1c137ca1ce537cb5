// `aisp profile` and `bench run --profile` (docs/profiling.md): re-runs selected variants in a worker under
// Nsight Compute, one ncu process per variant, so that each variant gets its own .ncu-rep and nothing has
// to be matched back by launch order. The worker validates once, warms up, then makes one launch inside the
// NVTX range that ncu's --nvtx-include filter selects; the parent exports the report's raw page to CSV,
// parses it (core/profile/profile.hpp) and writes profile.json next to the reports.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.hpp"
#include "core/profile/profile.hpp"
#include "core/results/results.hpp"

namespace aisp {

struct RunOptions;
struct RunOutcome;

// ncu could not be found or is not executable: a setup problem the user fixes, reported in one line with
// the bad-input exit code (2), before anything runs.
class ProfilerMissing : public UsageError {
 public:
  using UsageError::UsageError;
};

// `explicit_path` when given (must be an executable file), else `ncu` on PATH, else
// /usr/local/cuda/bin/ncu. Throws ProfilerMissing naming where it looked.
std::string find_ncu(const std::string& explicit_path);

struct ProfileOptions {
  std::vector<std::string> selectors;
  std::vector<std::pair<std::string, std::int64_t>> axis_overrides;
  bool include_hidden = false;
  profile::MetricSet set = profile::MetricSet::minimal;
  profile::ReplayMode replay = profile::ReplayMode::kernel;
  bool lock_clocks_to_base = false;  // --clock-control base; never implied
  std::string ncu;                   // resolved path (find_ncu)
  std::string out_dir;               // empty: artifacts/profiles/<UTC time>_<label>
  int device = 0;
  int warmup_launches = 3;
  double timeout_s = 600;  // per ncu process
  // > 0: also export each report's Source page (per-SASS-instruction stall samples; needs the full set's
  // SourceCounters) and keep this many hottest instructions and most executed opcodes.
  std::size_t source_top = 0;
};

struct ProfileOutcome {
  profile::ProfileRunData data;
  std::string out_dir;
  std::size_t failed = 0;          // variants that could not be profiled (status failed)
  std::string machine_wide_error;  // set when the counters cannot be read at all (then the rest is skipped)
};

// Throws UsageError (selection, axes, output folder), NoDeviceError. Writes <out_dir>/profile.json.
ProfileOutcome run_profiles(const ProfileOptions& options, std::ostream& progress);

// After `bench run`: profiles the variants that passed (PASS or NOISY) into <run folder>/profile/, links
// each profile from results.json (VariantProfile) and rewrites it. Returns the profile outcome.
ProfileOutcome profile_after_bench(RunOutcome& outcome, const RunOptions& run, profile::MetricSet set,
                                   const std::string& ncu, std::ostream& progress);

// The worker's side: `aisp __profile-worker --config FILE`. Returns its exit status.
int profile_worker_main(const std::string& config_path);

}  // namespace aisp
