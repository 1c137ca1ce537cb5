// ch16:paged_attention — how many pieces the split-KV steps (03, 04) cut each sequence's context into.
// Plain C++ (no CUDA): the CPU tests check it. Hardware facts come in as arguments, never as literals.
#pragma once

#include <algorithm>
#include <cmath>

namespace aisp::ch16::paged_attention {

struct SplitPlan {
  int splits = 1;           // blocks per (sequence, head): grid.y
  int pages_per_split = 1;  // the last split takes what is left: between 1 and pages_per_split pages
};

// items: blocks per split (batch x heads for step 03, batch x kv_heads for step 04); pages: pages per
// sequence; resident_blocks: blocks the whole GPU runs at once (SM count x the occupancy calculator's
// blocks per SM); min_pages: the fewest pages worth a block (one per warp, so no warp idles).
//
// The blocks all do about the same work, so the launch takes ceil(waves) block-times for
// waves = items x splits / resident_blocks: a last wave a third full costs as much as a full one, and a
// single wave a quarter full leaves three quarters of the GPU idle. The plan is the fewest splits whose
// waves are at least 90% used (waves / ceil(waves) >= 0.9); when no split count gets there, the best
// one. Fewest, because every split costs a partial (max, sum, accumulator) write and its merge. (The same
// rule as FlashAttention's num_splits_heuristic, with a fixed 90% in place of its 85% of the best.)
// Splits are cut at page boundaries and every split holds at least one page.
inline SplitPlan plan_splits(int items, int pages, int resident_blocks, int min_pages) {
  const int min_per_split = std::max(1, min_pages);
  const int most = (pages + min_per_split - 1) / min_per_split;
  SplitPlan best{1, pages};
  double best_use = -1.0;
  for (int s = 1; s <= most; ++s) {
    const int per_split = std::max(min_per_split, (pages + s - 1) / s);
    const int splits = (pages + per_split - 1) / per_split;
    const double waves = static_cast<double>(items) * splits / std::max(1, resident_blocks);
    const double use = waves / std::ceil(waves);
    if (use >= 0.9) return {splits, per_split};
    if (use > best_use) {
      best_use = use;
      best = {splits, per_split};
    }
  }
  return best;
}

}  // namespace aisp::ch16::paged_attention
