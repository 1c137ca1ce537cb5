// ch14:autotune — the tile shapes the ladder chooses among, the rule that picks a winner from their
// timings, and the cache key of a winner. Plain C++ (no CUDA headers) so that the CPU tests check them.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chapters/ch14_compilers/common/kernel_cache.hpp"

namespace aisp::ch14::autotune {

// One instantiation of the tiled kernel (tiled_sgemm.cuh): a block computes a BM x BN tile of C, stepping
// through k BK at a time; each of its threads computes TM x TN outputs. Every candidate has 256 threads
// ((BM / TM) * (BN / TN)) and 16 thread columns (BN / TN), so the loads and the thread layout are alike
// and only the tile shape differs.
struct TileConfig {
  int bm, bn, bk, tm, tn;
  // "128x128x8_8x8": the name in facts, logs and cache files.
  std::string name() const {
    return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + "_" + std::to_string(tm) +
           "x" + std::to_string(tn);
  }
};

// Largest first. Index 0 is 01_fixed_tile's default: the 128 x 128 tile with 8 x 8 outputs per thread that
// the register-tiling tutorials arrive at, and the best of these at large square sizes.
inline constexpr std::array<TileConfig, 6> k_tiles = {{{128, 128, 8, 8, 8},
                                                      {128, 64, 8, 8, 4},
                                                      {64, 128, 8, 4, 8},
                                                      {64, 64, 8, 4, 4},
                                                      {64, 32, 8, 4, 2},
                                                      {32, 32, 8, 2, 2}}};
inline constexpr int k_default_tile = 0;
inline constexpr int k_tile_threads = 256;

inline std::optional<int> tile_index(std::string_view name) {
  for (std::size_t i = 0; i < k_tiles.size(); ++i) {
    if (k_tiles[i].name() == name) return static_cast<int>(i);
  }
  return std::nullopt;
}

// A challenger replaces the default only when it is faster by more than this fraction: two tiles within
// the timing's noise are a tie, and a tie goes to the default, so a rerun does not flip between them.
inline constexpr double k_win_margin = 0.03;

// The index of the winner among `ms` (one time per candidate; a non-finite or non-positive time means the
// candidate could not be timed and never wins). The fastest wins, the lowest index among equals, unless
// the default is within `margin` of it. With no usable time at all, the default.
inline int pick_winner(const std::vector<double>& ms, int default_index, double margin = k_win_margin) {
  const auto usable = [&](std::size_t i) { return i < ms.size() && std::isfinite(ms[i]) && ms[i] > 0; };
  int best = -1;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (usable(i) && (best < 0 || ms[i] < ms[static_cast<std::size_t>(best)])) best = static_cast<int>(i);
  }
  if (best < 0) return default_index;
  const auto d = static_cast<std::size_t>(default_index);
  if (default_index >= 0 && usable(d) && ms[d] * (1.0 - margin) <= ms[static_cast<std::size_t>(best)]) {
    return default_index;
  }
  return best;
}

// The candidates' names, in order: part of the key, so that a changed list retunes.
inline std::string tile_list() {
  std::string s;
  for (const auto& t : k_tiles) s += (s.empty() ? "" : ",") + t.name();
  return s;
}

// Bump when tiled_sgemm.cuh changes in a way that could change which tile wins.
inline constexpr int k_kernel_revision = 1;

// A winner depends on the device (name and compute capability), the shape, the candidates and the kernel.
inline CacheKey winner_key(std::string_view device_name, int cc, int m, int n, int k) {
  CacheKey key;
  key.add("kind", "autotune")
      .add("ladder", "ch14:autotune")
      .add("kernel_revision", k_kernel_revision)
      .add("candidates", tile_list())
      .add("device", device_name)
      .add("cc", cc)
      .add("m", m)
      .add("n", n)
      .add("k", k);
  return key;
}

}  // namespace aisp::ch14::autotune
