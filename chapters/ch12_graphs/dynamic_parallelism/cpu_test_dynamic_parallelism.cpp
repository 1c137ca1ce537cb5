// The decision, the integrand, the host reference and the tolerance of ch12:dynamic_parallelism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "chapters/ch12_graphs/dynamic_parallelism/reference.hpp"

namespace {

using namespace aisp::ch12::dynamic_parallelism;

TEST(DynamicParallelismReference, TheDecisionDoublesTheSamplesPerLevel) {
  EXPECT_EQ(samples_of(0.0f), 1024);
  EXPECT_EQ(samples_of(0.999f), 1024);
  EXPECT_EQ(samples_of(1.0f), 2048);
  EXPECT_EQ(samples_of(5.5f), 1024 << 5);
  EXPECT_EQ(samples_of(10.99f), k_max_samples);
  EXPECT_EQ(k_max_samples, 1 << 20);
  // Out-of-range inputs are clamped, never a size the child grid cannot cover.
  EXPECT_EQ(samples_of(11.0f), k_max_samples);
  EXPECT_EQ(samples_of(-1.0f), 1024);
  static_assert(samples_of(3.0f) == 8192);  // constexpr: the kernels use the same function
}

TEST(DynamicParallelismReference, AbscissaeAreExactMidpoints) {
  EXPECT_EQ(abscissa(0, 1024), 0.5f / 1024.0f);
  EXPECT_EQ(abscissa(1023, 1024), 1023.5f / 1024.0f);
  const std::int32_t n = k_max_samples;
  EXPECT_EQ(static_cast<double>(abscissa(n - 1, n)), (n - 0.5) / n);  // still exact at 2^20
}

TEST(DynamicParallelismReference, TheIntegrandIsAPositivePeak) {
  EXPECT_EQ(integrand(16.0f, 0.0f), 1.0f);
  EXPECT_EQ(integrand(3.0f, 1.0f), 0.25f);
  EXPECT_GT(integrand(std::exp2(20.0f), 0.9999f), 0.0f);
  EXPECT_LT(integrand(std::exp2(20.0f), 0.5f), 1e-5f);
}

TEST(DynamicParallelismReference, TheMidpointRuleConvergesToTheIntegral) {
  // Every level gets the same samples per peak width, so the relative error stays small at every level.
  for (const float r : {0.5f, 3.25f, 7.75f, 10.5f}) {
    const float s = std::exp2(2.0f * r);
    const double got = cell_reference(s, samples_of(r));
    const double want = cell_integral(static_cast<double>(s));
    EXPECT_NEAR(got, want, 1e-6 * want) << "r = " << r;
  }
}

TEST(DynamicParallelismReference, CellsSpanAThousandfoldRangeOfWork) {
  std::uint64_t total = 0;
  for (int level = 0; level < k_levels; ++level) total += static_cast<std::uint64_t>(samples_of(level + 0.5f));
  EXPECT_EQ(samples_of(10.5f) / samples_of(0.5f), 1024);
  // Levels drawn uniformly: a mean of total / 11 ~ 190,000 samples per cell, so the default 1,024 cells
  // are ~2 * 10^8 samples, while the median cell has 32 blocks at most.
  EXPECT_GT(total / k_levels, 150000u);
  EXPECT_LT(total / k_levels, 250000u);
}

// The kernels' order for one child block (reference.hpp k_serial_adds), replayed on the host; the blocks
// are then added in the order given (the device's order is whatever order they finish in).
float child_block_sum(float s, std::int32_t n, std::int32_t block) {
  const float inv_n = 1.0f / static_cast<float>(n);
  std::vector<float> lane(k_child_threads);
  for (int t = 0; t < k_child_threads; ++t) {
    float sum = 0.0f;
    for (int u = 0; u < k_samples_per_thread; ++u) {
      const float h = integrand(s, abscissa(block * k_base_samples + u * k_child_threads + t, n));
      sum = u == 0 ? h : sum + h;
    }
    lane[static_cast<std::size_t>(t)] = sum;
  }
  float total = 0.0f;
  for (int w = 0; w < k_child_threads / 32; ++w) {
    std::vector<float> v(lane.begin() + w * 32, lane.begin() + (w + 1) * 32);
    for (int offset = 16; offset > 0; offset /= 2) {
      std::vector<float> next(32);
      for (std::size_t l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ static_cast<std::size_t>(offset)];
      v = next;
    }
    total = w == 0 ? v[0] : total + v[0];
  }
  return total * inv_n;
}

TEST(DynamicParallelismTolerance, CoversTheKernelOrderOnTheLargestCell) {
  const float r = 10.5f;
  const float s = std::exp2(2.0f * r);
  const std::int32_t n = samples_of(r);
  const auto ref = static_cast<float>(cell_reference(s, n));
  const double rtol = relative_tolerance();
  // Two orders of the 1,024 block sums: first to last, and last to first (the smallest first).
  float forward = 0.0f, backward = 0.0f;
  std::vector<float> blocks(static_cast<std::size_t>(n / k_base_samples));
  for (std::size_t b = 0; b < blocks.size(); ++b) blocks[b] = child_block_sum(s, n, static_cast<std::int32_t>(b));
  for (std::size_t b = 0; b < blocks.size(); ++b) forward += blocks[b];
  for (std::size_t b = blocks.size(); b-- > 0;) backward += blocks[b];
  EXPECT_LE(std::fabs(forward - ref), rtol * ref);
  EXPECT_LE(std::fabs(backward - ref), rtol * ref);
  EXPECT_LT(rtol, 1e-4);
  EXPECT_GT(rtol, 5e-5);
}

}  // namespace
