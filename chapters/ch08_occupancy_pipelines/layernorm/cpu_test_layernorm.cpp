// ch08:layernorm — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "chapters/ch08_occupancy_pipelines/layernorm/reference.hpp"

namespace aisp::ch08::layernorm {
namespace {

TEST(Ch08LayernormReference, OneRowByHand) {
  // {1, 2, 3, 4}: mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  const auto y = layernorm_rows({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, 1, 4, 0.0);
  const double s = std::sqrt(1.25);
  EXPECT_NEAR(y[0], -1.5 / s, 1e-15);
  EXPECT_NEAR(y[1], -0.5 / s, 1e-15);
  EXPECT_NEAR(y[2], 0.5 / s, 1e-15);
  EXPECT_NEAR(y[3], 1.5 / s, 1e-15);
}

TEST(Ch08LayernormReference, WeightScalesAndBiasShiftsPerColumn) {
  const auto y = layernorm_rows({-1, 1}, {2, 3}, {10, 20}, 1, 2, 0.0);  // x_hat = {-1, 1}
  EXPECT_NEAR(y[0], -2 + 10, 1e-15);
  EXPECT_NEAR(y[1], 3 + 20, 1e-15);
}

TEST(Ch08LayernormReference, EpsKeepsAConstantRowFinite) {
  // Zero variance: x - mean = 0 everywhere, so the output is the bias, not NaN.
  const auto y = layernorm_rows({7, 7, 7}, {1, 1, 1}, {0.5, -0.5, 0}, 1, 3, 1e-5);
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], -0.5);
  EXPECT_DOUBLE_EQ(y[2], 0.0);
}

TEST(Ch08LayernormReference, RowsAreIndependentAndShiftInvariant) {
  // Row 1 is row 0 shifted by 1000: a large mean must not change the normalized values.
  const auto y = layernorm_rows({1, 2, 4, 1001, 1002, 1004}, {1, 1, 1}, {0, 0, 0}, 2, 3, 1e-5);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(y[c], y[3 + c], 1e-9);
  EXPECT_NEAR(y[0] + y[1] + y[2], 0.0, 1e-12);
}

}  // namespace
}  // namespace aisp::ch08::layernorm
