// ch04 — the grid the chapter's elementwise kernels launch with: one full wave of `threads`-thread blocks
// (as ch07:copy), but no more blocks than `n` elements need (at 4 KiB a kernel is a few blocks, whose
// launch is then the whole cost). Host-only; from the harness GPU's facts that every ladder's Args carry.
#pragma once

#include <algorithm>
#include <cstddef>

namespace aisp::ch04 {

inline int wave_grid(int sm_count, int max_threads_per_sm, std::size_t n, int threads) {
  const std::size_t wave = static_cast<std::size_t>(sm_count) * static_cast<std::size_t>(max_threads_per_sm / threads);
  const std::size_t needed = (n + threads - 1) / threads;
  return static_cast<int>(std::clamp<std::size_t>(needed, 1, std::max<std::size_t>(wave, 1)));
}

// The same from a ladder's Args, which carry rank 0's sm_count and max_threads_per_sm.
template <class LadderArgs>
int grid_for(const LadderArgs& a, std::size_t n, int threads) {
  return wave_grid(a.sm_count, a.max_threads_per_sm, n, threads);
}

}  // namespace aisp::ch04
