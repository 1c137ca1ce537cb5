// The host reference of ch12:graphs and the coefficient ranges its problem draws.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch12_graphs/graphs/reference.hpp"

namespace {

using namespace aisp::ch12::graphs;

TEST(GraphsReference, AppliesTheStepsInOrder) {
  // (2 * 1 + 3) = 5, then (0.5 * 5 - 1) = 1.5; the other order would give (0.5 * 1 - 1) * 2 + 3 = 2.
  const auto out = chain_reference({1.0f}, {2.0f, 0.5f}, {3.0f, -1.0f});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], 1.5f);
}

TEST(GraphsReference, EachElementIsIndependent) {
  const auto out = chain_reference({0.0f, 1.0f, -2.0f}, {3.0f}, {0.25f});
  EXPECT_EQ(out, (std::vector<float>{0.25f, 3.25f, -5.75f}));
}

TEST(GraphsReference, NoStepsIsTheIdentity) {
  EXPECT_EQ(chain_reference({1.5f, -2.0f}, {}, {}), (std::vector<float>{1.5f, -2.0f}));
}

TEST(GraphsReference, StepIsOneFusedMultiplyAdd) {
  // 1 + 2^-12 squared is 1 + 2^-11 + 2^-24: a separate multiply rounds the 2^-24 away (ties to even),
  // then subtracting (1 + 2^-11) gives 0; the fused operation keeps it. The device's fmaf does the latter.
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const float c = -(1.0f + std::ldexp(1.0f, -11));
  EXPECT_EQ(chain_step(a, a, c), std::ldexp(1.0f, -24));
}

// Coefficients as the problem draws them, from the ranges in reference.hpp.
struct Chain {
  std::vector<float> scale, shift;
};
Chain draw_chain(int kernels, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> s(k_scale_lo, k_scale_hi), t(k_shift_lo, k_shift_hi);
  Chain c;
  for (int k = 0; k < kernels; ++k) {
    c.scale.push_back(static_cast<float>(s(rng)));
    c.shift.push_back(static_cast<float>(t(rng)));
  }
  return c;
}

TEST(GraphsReference, OutputStillDependsOnTheInputAfterTheLongestChain) {
  // The gate's second seed catches a cached answer only if x still matters at the output: the product of
  // K = 256 scales (twice the default) must stay well away from 0, and the outputs of different x differ
  // by far more than the tolerance.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Chain c = draw_chain(256, seed);
    const auto out = chain_reference({-1.0f, 0.0f, 1.0f}, c.scale, c.shift);
    EXPECT_GT(out[2] - out[1], 0.3f) << "seed " << seed;
    EXPECT_GT(out[1] - out[0], 0.3f) << "seed " << seed;
    for (const float v : out) EXPECT_LT(std::fabs(v), 10.0f) << "seed " << seed;
  }
}

TEST(GraphsReference, ASkippedStepIsFarOutsideTheTolerance) {
  // The ladder's tolerance is rtol 1e-6; dropping any one step of a 128-step chain must move outputs far
  // more than that, or a variant that skips a launch could pass.
  const Chain c = draw_chain(128, 7);
  const std::vector<float> x = {-0.75f, 0.1f, 0.9f};
  const auto full = chain_reference(x, c.scale, c.shift);
  for (std::size_t skip = 0; skip < c.scale.size(); skip += 17) {
    Chain shorter = c;
    shorter.scale.erase(shorter.scale.begin() + static_cast<std::ptrdiff_t>(skip));
    shorter.shift.erase(shorter.shift.begin() + static_cast<std::ptrdiff_t>(skip));
    const auto out = chain_reference(x, shorter.scale, shorter.shift);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(double(out[i]) - full[i]) / std::fabs(double(full[i])));
    }
    EXPECT_GT(worst, 1e-5) << "skipping step " << skip;
  }
}

}  // namespace
