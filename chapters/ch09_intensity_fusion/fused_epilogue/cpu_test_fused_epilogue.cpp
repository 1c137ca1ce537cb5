// The ch09:fused_epilogue host reference on hand-checkable cases.
#include <gtest/gtest.h>

#include "chapters/ch09_intensity_fusion/fused_epilogue/reference.hpp"

namespace aisp::ch09::fused_epilogue {
namespace {

TEST(Ch09FusedEpilogueReference, GeluTanhKnownValues) {
  EXPECT_DOUBLE_EQ(gelu_tanh(0.0), 0.0);
  // gelu(1) = 0.5 (1 + tanh(0.79788456 * 1.044715)) = 0.8411920
  EXPECT_NEAR(gelu_tanh(1.0), 0.8411920, 1e-6);
  EXPECT_NEAR(gelu_tanh(-1.0), -0.1588080, 1e-6);
  // Far from zero GELU is the identity on the right and zero on the left.
  EXPECT_NEAR(gelu_tanh(10.0), 10.0, 1e-12);
  EXPECT_NEAR(gelu_tanh(-10.0), 0.0, 1e-12);
}

TEST(Ch09FusedEpilogueReference, BiasIsPerColumn) {
  // A 2x1, B 1x2: A B = [1 2; 3 6]; bias (10, -10) goes to the columns, not the rows.
  const auto c = reference_fused({1, 3}, {1, 2}, {10, -10}, 2, 2, 1);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_NEAR(c[0], gelu_tanh(11), 1e-12);
  EXPECT_NEAR(c[1], gelu_tanh(-8), 1e-12);
  EXPECT_NEAR(c[2], gelu_tanh(13), 1e-12);
  EXPECT_NEAR(c[3], gelu_tanh(-4), 1e-12);
  EXPECT_GT(c[0], 10.9);
  EXPECT_LT(std::abs(c[1]), 1e-6);
}

}  // namespace
}  // namespace aisp::ch09::fused_epilogue
