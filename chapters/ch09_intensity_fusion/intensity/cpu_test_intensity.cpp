// The ch09:intensity host reference on hand-checkable cases.
#include <gtest/gtest.h>

#include "chapters/ch09_intensity_fusion/intensity/reference.hpp"

namespace aisp::ch09::intensity {
namespace {

TEST(Ch09IntensityReference, OneFmaIsAlphaXPlusBeta) {
  EXPECT_FLOAT_EQ(fma_chain(2.0f, 1), 2.0f * k_alpha + k_beta);
  EXPECT_FLOAT_EQ(fma_chain(-0.5f, 0), -0.5f);
}

TEST(Ch09IntensityReference, OneIsTheFixedPointAndOtherValuesMoveTowardIt) {
  // alpha + beta = 1 exactly, so 1 stays 1 however long the chain.
  EXPECT_EQ(fma_chain(1.0f, 256), 1.0f);
  // Every FMA counts: a longer chain is strictly closer to 1 than a shorter one.
  const float x = -1.0f;
  EXPECT_LT(std::abs(fma_chain(x, 64) - 1.0f), std::abs(fma_chain(x, 63) - 1.0f));
  EXPECT_NE(fma_chain(x, 255), fma_chain(x, 256));
}

TEST(Ch09IntensityReference, ChainOfTwoMatchesClosedForm) {
  // f(f(x)) = alpha^2 x + alpha beta + beta; for x = 0.5 with power-of-two terms it is exact in FP32.
  const double a = k_alpha, b = k_beta;
  EXPECT_NEAR(fma_chain(0.5f, 2), a * a * 0.5 + a * b + b, 1e-7);
  const auto y = reference_chain({0.5, 1.0}, 2);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[1], 1.0);
}

}  // namespace
}  // namespace aisp::ch09::intensity
