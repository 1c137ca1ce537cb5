// ch08:rmsnorm — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "chapters/ch08_occupancy_pipelines/rmsnorm/reference.hpp"

namespace aisp::ch08::rmsnorm {
namespace {

TEST(Ch08RmsnormReference, OneRowByHand) {
  // {3, 4}: mean of squares (9 + 16) / 2 = 12.5.
  const auto y = rmsnorm_rows({3, 4}, {1, 1}, 1, 2, 0.0);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5), 1e-15);
}

TEST(Ch08RmsnormReference, NoMeanIsSubtracted) {
  // A constant row normalizes to 1 (layer norm would give 0).
  const auto y = rmsnorm_rows({5, 5, 5}, {1, 2, 3}, 1, 3, 0.0);
  EXPECT_NEAR(y[0], 1.0, 1e-15);
  EXPECT_NEAR(y[1], 2.0, 1e-15);
  EXPECT_NEAR(y[2], 3.0, 1e-15);
}

TEST(Ch08RmsnormReference, EpsKeepsAZeroRowFinite) {
  const auto y = rmsnorm_rows({0, 0}, {1, 1}, 1, 2, 1e-6);
  EXPECT_DOUBLE_EQ(y[0], 0.0);
  EXPECT_DOUBLE_EQ(y[1], 0.0);
}

TEST(Ch08RmsnormReference, RowsAreIndependentAndScaleInvariant) {
  // Row 1 is row 0 times 10: without eps the outputs would be equal.
  const auto y = rmsnorm_rows({1, -2, 2, 10, -20, 20}, {1, 1, 1}, 2, 3, 0.0);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(y[c], y[3 + c], 1e-15);
  EXPECT_NEAR(y[0] * y[0] + y[1] * y[1] + y[2] * y[2], 3.0, 1e-14);  // mean of squares is 1
}

}  // namespace
}  // namespace aisp::ch08::rmsnorm
