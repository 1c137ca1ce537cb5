// The harness pass for one target, run inside a worker process (docs/architecture.md "The harness, in one
// pass"): requirements, inputs, validation with two seeds, interleaved timing, the timed-output check.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/axes.hpp"
#include "core/base/device_facts.hpp"
#include "core/base/registry.hpp"
#include "core/measure/stopping.hpp"

namespace aisp {

struct HarnessConfig {
  std::string target;                 // "ch07:copy"
  std::vector<std::string> variants;  // file stems to run ("01_chunked", "vendor_memcpy")
  AxisValues axes;
  CacheMode mode = CacheMode::cold;
  L2Flush l2_flush = L2Flush::read;   // cold mode: how the timer evicts the L2
  int device = 0;
  int warmup_launches = 3;            // at least this many warm-up launches ...
  double warmup_min_s = 0.02;         // ... and this much time, then until three agree within 5%
  double target_interval_s = 1e-3;    // hot mode: batch launches until one interval lasts this long
  StoppingRule rule;
  bool audit = true;                  // the activity and timing audit (docs/trust.md); off only to measure its cost
  // The checks below are on in every run; turning one off exists only so that the cheat suite can show
  // that the cheat it catches gets past everything else (tests/gpu/test_cheats.cpp).
  bool audit_timed = true;            // audit launches among the timed rounds and the timed-output launch
  bool mask_references = true;        // references masked in device memory while variants run
  bool fresh_inputs = true;           // launches on inputs from seeds never used before, checked and timed
  int fresh_launches = 3;             // how many fresh seeds (one launch each, plus a paired repeat)
  std::vector<std::uint64_t> seeds{0x243F6A88ULL, 0x85A308D3ULL};  // two seeds: see measurement.md
};

nlohmann::json to_json(const HarnessConfig& c);
HarnessConfig harness_config_from_json(const nlohmann::json& j);

// Receives the worker's messages (one JSON object each; see docs/results-schema.md "Worker protocol").
using Emit = std::function<void(const nlohmann::ordered_json&)>;

// Exit status of a worker whose CUDA context was lost to a variant (a sticky error): the parent records
// that variant as ERROR and starts a new worker for the rest.
inline constexpr int k_worker_exit_sticky_error = 86;

// Why the device cannot run a variant ("" when it can): a SKIPPED verdict's reason. Also used by the
// profiling worker (device/profile_pass.cpp).
std::string requirement_gap(const VariantInfo& v, const DeviceFacts& d);

// Runs the whole pass. Returns the worker's exit status (0, or k_worker_exit_sticky_error).
int run_target(const HarnessConfig& config, const Emit& emit);

}  // namespace aisp
