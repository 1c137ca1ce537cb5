// ch10:cluster_reduction — the host reference, and the tolerance against simulations of the exact fp32
// orders that steps 01 and 02 run.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "chapters/ch10_tensor_cores/cluster_reduction/reference.hpp"

namespace {

using namespace aisp::ch10::cluster_reduction;

TEST(ClusterReductionReference, SmallSumsAreExact) {
  EXPECT_EQ(sum_reference(std::vector<float>{1.0f, 2.0f, 3.5f}), 6.5);
  EXPECT_EQ(sum_reference(std::vector<float>{}), 0.0);
  // 1e16 + 1 is not representable in double (the spacing there is 2); a plain loop returns 0.
  EXPECT_EQ(sum_reference(std::vector<double>{1e16, 1.0, -1e16}), 1.0);
}

TEST(ClusterReductionGeometry, TilesCoverEveryElementOnce) {
  EXPECT_EQ(tile_elems(4), 1024u);
  EXPECT_EQ(tile_count(1024, 4), 1u);
  EXPECT_EQ(tile_count(1025, 4), 2u);
  EXPECT_EQ(tile_count((std::size_t{1} << 20) + 3, 4), 1025u);
  EXPECT_EQ(tile_count(std::size_t{1} << 28, 16), 65536u);
  EXPECT_TRUE(supported_items_per_thread(16));
  EXPECT_FALSE(supported_items_per_thread(12));
  EXPECT_FALSE(supported_items_per_thread(128));
}

// lane 0's value after `for (offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(~0u, v, offset)`:
// a lane whose source is out of range gets its own value back (it does not matter for lane 0).
float warp_sum_lane0(std::array<float, 32> v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<float, 32> next{};
    for (int lane = 0; lane < 32; ++lane) next[lane] = v[lane] + (lane + offset < 32 ? v[lane + offset] : v[lane]);
    v = next;
  }
  return v[0];
}

// The sum of tile `b` in fp32, in the exact order of the kernels: per thread a running sum of
// (x + y) + (z + w) over its float4s, then the warp tree, then warp 0's tree over the 8 warp sums.
float tile_sum(const std::vector<float>& x, std::size_t b, int items) {
  const int vecs = items / 4;
  const std::size_t n = x.size();
  auto at = [&](std::size_t j) { return j < n ? x[j] : 0.0f; };
  std::array<float, k_block_threads / 32> warp_sums{};
  for (int w = 0; w < k_block_threads / 32; ++w) {
    std::array<float, 32> lanes{};
    for (int lane = 0; lane < 32; ++lane) {
      const int t = 32 * w + lane;
      float s = 0.0f;
      for (int k = 0; k < vecs; ++k) {
        const std::size_t j = 4 * (b * k_block_threads * vecs + static_cast<std::size_t>(k) * k_block_threads + t);
        s += (at(j) + at(j + 1)) + (at(j + 2) + at(j + 3));
      }
      lanes[lane] = s;
    }
    warp_sums[w] = warp_sum_lane0(lanes);
  }
  std::array<float, 32> lanes{};
  std::copy(warp_sums.begin(), warp_sums.end(), lanes.begin());
  return warp_sum_lane0(lanes);
}

// Atomics reach the L2 in an order nobody controls: a running fp32 sum over the partials, shuffled.
float atomic_sum(std::vector<float> partials, std::mt19937_64& rng) {
  std::shuffle(partials.begin(), partials.end(), rng);
  float out = 0.0f;
  for (const float p : partials) out += p;
  return out;
}

std::vector<float> tile_sums(const std::vector<float>& x, int items) {
  std::vector<float> sums(tile_count(x.size(), items));
  for (std::size_t b = 0; b < sums.size(); ++b) sums[b] = tile_sum(x, b, items);
  return sums;
}

// Step 02: tiles grouped by 8 consecutive blocks (the last cluster padded with empty tiles, which sum to
// 0), the 8 block sums added by a warp tree in rank 0.
std::vector<float> cluster_sums(const std::vector<float>& tiles) {
  std::vector<float> sums((tiles.size() + k_cluster_blocks - 1) / k_cluster_blocks);
  for (std::size_t c = 0; c < sums.size(); ++c) {
    std::array<float, 32> lanes{};
    for (int r = 0; r < k_cluster_blocks; ++r) {
      const std::size_t b = c * k_cluster_blocks + r;
      lanes[r] = b < tiles.size() ? tiles[b] : 0.0f;
    }
    sums[c] = warp_sum_lane0(lanes);
  }
  return sums;
}

std::vector<float> uniform_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST(ClusterReductionSimulation, SumsOfAKnownArrayAreRightInBothOrders) {
  // 3000 ones (two full tiles of 1024, one partial, a tail of n % 4 = 0) and then 2 more: n % 4 = 2.
  std::vector<float> x(3002, 1.0f);
  std::mt19937_64 rng(1);
  const auto tiles = tile_sums(x, 4);
  ASSERT_EQ(tiles.size(), 3u);
  EXPECT_EQ(tiles[0], 1024.0f);
  EXPECT_EQ(tiles[2], 954.0f);
  EXPECT_EQ(atomic_sum(tiles, rng), 3002.0f);
  EXPECT_EQ(atomic_sum(cluster_sums(tiles), rng), 3002.0f);
}

// The derivation in reference.hpp against the orders themselves, at the GPU test size (1,025 tiles) and
// with a larger tile for more per-thread work (2^21 + 5 values, 8 items per thread: 1,025 tiles again,
// a different tail), over many seeds: every error under atol, and the typical error near the predicted
// deviation (the model is an upper bound, so somewhat under it: ~0.7-0.8 of it in these simulations).
void check_tolerance(std::size_t n, int items, int seeds) {
  const double sigma = sum_error_sigma(n, items, uniform_rms());
  const double atol = sum_atol(n, items, uniform_rms());
  double worst = 0, squares_01 = 0;
  std::mt19937_64 order(7);
  for (int seed = 1; seed <= seeds; ++seed) {
    const auto x = uniform_inputs(n, static_cast<std::uint64_t>(seed));
    const double exact = sum_reference(x);
    const auto tiles = tile_sums(x, items);
    const double e01 = std::fabs(static_cast<double>(atomic_sum(tiles, order)) - exact);
    const double e02 = std::fabs(static_cast<double>(atomic_sum(cluster_sums(tiles), order)) - exact);
    EXPECT_LE(e01, atol) << "step 01 order, seed " << seed;
    EXPECT_LE(e02, atol) << "step 02 order, seed " << seed;
    worst = std::max({worst, e01, e02});
    squares_01 += e01 * e01;
  }
  const double rms_error = std::sqrt(squares_01 / seeds);
  EXPECT_LT(rms_error, 1.5 * sigma) << "the model underestimates the error";
  EXPECT_GT(rms_error, 0.1 * sigma) << "the model is far too loose";
  EXPECT_LT(worst, atol / 2);
}

TEST(ClusterReductionTolerance, CoversBothOrdersAtTheTestSize) { check_tolerance((std::size_t{1} << 20) + 3, 4, 16); }

TEST(ClusterReductionTolerance, CoversBothOrdersWithLongerThreadSums) {
  check_tolerance((std::size_t{1} << 21) + 5, 8, 8);
}

TEST(ClusterReductionTolerance, CatchesADroppedTileAtEveryDefaultPoint) {
  // A lost tile changes the sum by a value of deviation sqrt(tile) rms; atol stays under a tenth of it.
  const std::size_t n = std::size_t{1} << 28;
  for (const int items : {4, 8, 16, 32, 64}) {
    const double tile_sigma = std::sqrt(static_cast<double>(tile_elems(items))) * uniform_rms();
    EXPECT_LT(sum_atol(n, items, uniform_rms()), 0.1 * tile_sigma) << "items_per_thread " << items;
  }
  // And it is far tighter than a bound for one running sum over all n (ch07:reduction's 3 u n rms, ~28).
  EXPECT_LT(sum_atol(n, 16, uniform_rms()), 1.0);
  EXPECT_GT(sum_atol(n, 16, uniform_rms()), 0.1);
}

}  // namespace
