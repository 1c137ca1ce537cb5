// The host reference and the tolerance of ch12:pdl.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "chapters/ch12_graphs/pdl/reference.hpp"

namespace {

using namespace aisp::ch12::pdl;

bool within(double got, double want) { return std::fabs(got - want) <= k_atol + k_rtol * std::fabs(want); }

TEST(PdlReference, SiluAtKnownPoints) {
  EXPECT_EQ(silu(0.0), 0.0);
  EXPECT_NEAR(silu(1.0), 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(silu(-4.0), -4.0 / (1.0 + std::exp(4.0)), 1e-15);
  // x * sigmoid(x): close to x for large x, close to 0 for very negative x.
  EXPECT_NEAR(silu(20.0), 20.0, 1e-6);
  EXPECT_NEAR(silu(-20.0), 0.0, 1e-6);
}

TEST(PdlReference, ScaleBias) {
  EXPECT_EQ(scale_bias(2.0, 0.5, -1.0), 0.0);
  EXPECT_EQ(scale_bias(-3.0, 1.25, 0.25), -3.5);
}

// What a variant computes, in fp32 as the kernels do: expf, an add, an IEEE division, then one fmaf.
float silu_fp32(float x) { return x / (1.0f + std::exp(-x)); }

TEST(PdlTolerance, CoversTheFp32EvaluationOverTheInputRanges) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> dx(k_x_lo, k_x_hi), dw(k_w_lo, k_w_hi), db(k_b_lo, k_b_hi);
  double worst_y = 0, worst_out = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(dx(rng)), w = static_cast<float>(dw(rng)), b = static_cast<float>(db(rng));
    const float y = silu_fp32(x);
    const float out = std::fma(y, w, b);
    const double y_ref = static_cast<float>(silu(x));
    const double out_ref = static_cast<float>(scale_bias(silu(x), w, b));
    ASSERT_TRUE(within(y, y_ref)) << "x " << x;
    ASSERT_TRUE(within(out, out_ref)) << "x " << x << " w " << w << " b " << b;
    worst_y = std::max(worst_y, std::fabs(y - y_ref));
    worst_out = std::max(worst_out, std::fabs(out - out_ref));
  }
  // The errors are real (fp32 differs from the rounded double) but far inside the tolerance.
  EXPECT_GT(worst_out, 0.0);
  EXPECT_LT(worst_out, k_atol / 3);
  EXPECT_LT(worst_y, k_atol / 3);
}

TEST(PdlTolerance, RejectsTheMistakesAConsumerCanMake) {
  // Forgetting the bias, or reading the producer's input instead of its output, is far outside it.
  const double x = 1.5, w = 0.8, b = 0.3;
  const double want = scale_bias(silu(x), w, b);
  EXPECT_FALSE(within(scale_bias(silu(x), w, 0.0), want));
  EXPECT_FALSE(within(scale_bias(x, w, b), want));
  // A read of y before the producer wrote it reads the gate's poison: NaN never passes.
  EXPECT_FALSE(within(std::nan(""), want));
}

}  // namespace
