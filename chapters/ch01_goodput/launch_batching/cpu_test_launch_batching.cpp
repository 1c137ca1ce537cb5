// The host reference, the tolerance and the stacking rule of ch01:launch_batching.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch01_goodput/launch_batching/reference.hpp"

namespace {

using namespace aisp::ch01::launch_batching;

TEST(LaunchBatchingReference, MultipliesEachItemBySharedB) {
  // Two items of 1 x 2 by a 2 x 2 B: [1 2] B and [3 4] B, B = [[1, 0], [1, 1]].
  const std::vector<double> a = {1, 2, 3, 4}, b = {1, 0, 1, 1};
  EXPECT_EQ(batched_gemm_reference(a, b, 2, 1, 2, 2), (std::vector<double>{3, 2, 7, 4}));
  // One 2 x 3 item by a 3 x 1 B.
  EXPECT_EQ(batched_gemm_reference({1, 2, 3, -1, 0, 1}, {1, 1, 1}, 1, 2, 1, 3), (std::vector<double>{6, 0}));
}

TEST(LaunchBatchingReference, StackedItemsEqualOneTallProduct) {
  // The identity step 03 relies on: batch items of m x k by B equal one (batch * m) x k product by B.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  const std::int64_t batch = 3, m = 4, n = 5, k = 6;
  std::vector<double> a(batch * m * k), b(k * n);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  EXPECT_EQ(batched_gemm_reference(a, b, batch, m, n, k), batched_gemm_reference(a, b, 1, batch * m, n, k));
}

TEST(LaunchBatchingStacking, LegalOnlyForSharedBAndDenseStacks) {
  EXPECT_TRUE(can_stack_into_one_gemm(problem_layout(64, 64, 64)));
  EXPECT_TRUE(can_stack_into_one_gemm(problem_layout(33, 40, 24)));
  BatchLayout own_b = problem_layout(64, 64, 64);
  own_b.stride_b = 64 * 64;  // a B per item: block-diagonal, not one GEMM
  EXPECT_FALSE(can_stack_into_one_gemm(own_b));
  BatchLayout padded = problem_layout(64, 64, 64);
  padded.stride_a += 64;  // a gap of one row between items
  EXPECT_FALSE(can_stack_into_one_gemm(padded));
  BatchLayout scattered_c = problem_layout(64, 64, 64);
  scattered_c.stride_c = 2 * 64 * 64;
  EXPECT_FALSE(can_stack_into_one_gemm(scattered_c));
}

TEST(LaunchBatchingInputs, Bf16RoundingKeepsEightSignificantBits) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);            // a tie: to even (1.0)
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie: to even (1 + 2/128)
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 128), 1.0f + 1.0f / 128);  // representable
  EXPECT_EQ(round_to_bf16(-0.3f), -round_to_bf16(0.3f));
  EXPECT_LE(std::fabs(round_to_bf16(0.3f) - 0.3f), 0.3f / 256);
}

// One C element accumulated in fp32 in the given order of its k products.
float fp32_dot(const std::vector<float>& x, const std::vector<float>& y, const std::vector<int>& order) {
  float s = 0;
  for (const int j : order) s += x[j] * y[j];  // the product of two bf16 values is exact in fp32
  return s;
}

TEST(LaunchBatchingTolerance, CoversFp32AccumulationInAnyOrderAndCatchesADroppedTerm) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const std::int64_t k : {24, 64, 256}) {
    const double atol = element_atol(k, 1.0);
    double worst = 0, dropped = 0;
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x(k), y(k);
      std::vector<double> xd(k), yd(k);
      for (std::int64_t j = 0; j < k; ++j) {
        x[j] = round_to_bf16(dist(rng));
        y[j] = round_to_bf16(dist(rng));
        xd[j] = x[j];
        yd[j] = y[j];
      }
      const double exact = batched_gemm_reference(xd, yd, 1, 1, 1, k)[0];
      std::vector<int> order(k);
      for (std::int64_t j = 0; j < k; ++j) order[j] = static_cast<int>(j);
      std::shuffle(order.begin(), order.end(), rng);
      const double err = std::fabs(static_cast<double>(fp32_dot(x, y, order)) - exact);
      worst = std::max(worst, err);
      dropped += std::fabs(static_cast<double>(x[order[0]]) * y[order[0]]) / 200;  // a product left out
      EXPECT_LE(err, atol) << "k " << k;
    }
    EXPECT_LT(worst, atol / 4) << "k " << k;  // round-to-nearest stays far inside the truncation margin
    // The gate catches a product left out or counted twice: its typical size (~0.25) is far above atol.
    EXPECT_GT(dropped, 10 * atol) << "k " << k;
  }
}

TEST(LaunchBatchingTolerance, GrowsAsKSquared) {
  EXPECT_NEAR(element_atol(64, 1.0), 4.0 * 64 * 64 / 16777216.0, 1e-12 + 1e-4 * element_atol(64, 1.0));
  EXPECT_NEAR(element_atol(128, 1.0) / element_atol(64, 1.0), 4.0, 1e-3);
  EXPECT_NEAR(element_atol(64, 2.0) / element_atol(64, 1.0), 4.0, 1e-12);
}

}  // namespace
