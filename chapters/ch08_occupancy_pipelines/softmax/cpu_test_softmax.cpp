// ch08:softmax — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "chapters/ch08_occupancy_pipelines/softmax/reference.hpp"

namespace aisp::ch08::softmax {
namespace {

TEST(Ch08SoftmaxReference, TwoValuesSplitByTheirExponentials) {
  // exp(0) : exp(ln 3) = 1 : 3.
  const auto y = softmax_rows({0.0, std::log(3.0)}, 1, 2);
  EXPECT_NEAR(y[0], 0.25, 1e-15);
  EXPECT_NEAR(y[1], 0.75, 1e-15);
}

TEST(Ch08SoftmaxReference, EqualInputsGiveAUniformRow) {
  const auto y = softmax_rows({5.0, 5.0, 5.0, 5.0}, 1, 4);
  for (double v : y) EXPECT_DOUBLE_EQ(v, 0.25);
}

TEST(Ch08SoftmaxReference, RowsAreIndependentAndSumToOne) {
  // Row 0 and row 1 differ by a constant shift, which softmax ignores; row 2 is different.
  const auto y = softmax_rows({1, 2, 3, 101, 102, 103, 0, 0, 9}, 3, 3);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(y[c], y[3 + c], 1e-15);
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(y[3 * r] + y[3 * r + 1] + y[3 * r + 2], 1.0, 1e-15);
  EXPECT_GT(y[8], 0.99);
  EXPECT_NEAR(y[6], y[7], 1e-18);
}

TEST(Ch08SoftmaxReference, LargeInputsDoNotOverflow) {
  // exp(1000) overflows a double; subtracting the row max first avoids it.
  const auto y = softmax_rows({1000.0, 1000.0}, 1, 2);
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], 0.5);
}

}  // namespace
}  // namespace aisp::ch08::softmax
