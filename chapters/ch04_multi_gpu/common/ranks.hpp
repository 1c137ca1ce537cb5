// ch04 — which GPUs take part in a multi-GPU ladder, and how its samples are timed: the `ranks` axis and
// the cache mode every ch04 ladder declares (each drives every rank from one process).
// Host-only, no CUDA: the CPU tests check it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/axes.hpp"
#include "core/base/error.hpp"
#include "core/base/registry.hpp"

namespace aisp::ch04 {

// One NVLink domain of an HGX board; the steps keep per-rank pointers in fixed arrays of this size.
constexpr int k_max_ranks = 8;

// The `ranks` axis of every ch04 ladder (rank_devices below reads it).
inline AxisSpec ranks_axis() {
  return {.name = "ranks", .default_value = 0,
          .help = "GPUs taking part, from the harness's GPU on (0: every GPU this process sees, up to 8; else 2 or more)",
          .min_value = 0};
}

// The cache mode of every ch04 ladder, hot: the cold mode's flush evicts the harness GPU's L2 only, so the
// other ranks would start warm; hot keeps every rank alike, and is how nccl-tests and torch.distributed
// time a collective (at the sizes where bandwidth is the question, far past the L2, the two agree).
inline constexpr CacheMode k_ranks_mode = CacheMode::hot;

// The GPUs of `asked` ranks (the axis' value) when this process sees `visible` GPUs and the harness runs
// on GPU `harness`: rank r on GPU (harness + r) % visible, so rank 0 is the harness's GPU. 0 asks for
// every visible GPU, up to k_max_ranks. UsageError for 1 (a collective over one GPU moves nothing over a
// link), for more than `visible` and for more than k_max_ranks. With one visible GPU, 0 gives one rank:
// the variants are then SKIPPED ("needs two or more GPUs"), but the harness's pass still allocates.
inline std::vector<int> rank_devices(std::int64_t asked, int visible, int harness, std::string_view ladder) {
  visible = std::max(visible, 1);
  const std::string name(ladder);
  if (asked == 1) {
    throw UsageError(name + ": ranks=1 moves nothing between GPUs: use 0 (every GPU) or 2 or more");
  }
  if (asked > visible) {
    throw UsageError(name + ": ranks=" + std::to_string(asked) + " but this process sees " + std::to_string(visible) +
                     " GPU(s)");
  }
  if (asked > k_max_ranks || asked < 0) {
    throw UsageError(name + ": ranks=" + std::to_string(asked) + ": 0, or 2 to " + std::to_string(k_max_ranks) +
                     " (one NVLink domain)");
  }
  const int ranks = asked == 0 ? std::min(visible, k_max_ranks) : static_cast<int>(asked);
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back((harness + r) % visible);
  return devices;
}

}  // namespace aisp::ch04
