// ch04 — the `phase` axis of the ladders that put collectives beside compute (ch04:overlap,
// ch04:tensor_parallel_gemm): one launch runs the step as it schedules its work (0), its compute alone (1)
// or its communication alone (2), so that three rows of one run give the exposed communication, t(0) - t(1),
// against the serial t(1) + t(2) and the ideal max(t(1), t(2)). Host-only, no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/error.hpp"

namespace aisp::ch04 {

enum class Phase { step = 0, compute = 1, comms = 2 };

// The axis value as a Phase; UsageError naming the ladder and its help text (what each phase runs there)
// outside 0..2.
inline Phase phase_from_axis(std::int64_t phase, std::string_view ladder, std::string_view help) {
  if (phase < 0 || phase > 2) {
    throw UsageError(std::string(ladder) + ": unknown phase " + std::to_string(phase) + "; " + std::string(help));
  }
  return static_cast<Phase>(phase);
}

constexpr bool runs_compute(Phase p) { return p != Phase::comms; }
constexpr bool runs_comms(Phase p) { return p != Phase::compute; }

}  // namespace aisp::ch04
