// CPU tests of ch08:async_copy's host reference on hand-checkable inputs.
#include <gtest/gtest.h>

#include "chapters/ch08_occupancy_pipelines/async_copy/reference.hpp"

namespace aisp::ch08::async_copy {
namespace {

TEST(AsyncCopyReference, WeightsAreTheBinomialRowAndSumToOne) {
  const float want[k_points] = {1, 8, 28, 56, 70, 56, 28, 8, 1};
  float sum = 0;
  for (int k = 0; k < k_points; ++k) {
    EXPECT_EQ(stencil_weight(k), want[k] / 256.0f) << k;
    sum += stencil_weight(k);
  }
  EXPECT_EQ(sum, 1.0f);
}

TEST(AsyncCopyReference, AnImpulseSpreadsIntoTheWeights) {
  std::vector<double> x(13, 0.0);
  x[6] = 1.0;
  const auto y = stencil(x);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 0.0);
  for (int k = 0; k < k_points; ++k) EXPECT_EQ(y[2 + k], stencil_weight(k_points - 1 - k)) << k;
  EXPECT_EQ(y[11], 0.0);
}

TEST(AsyncCopyReference, ZerosOutsideTheEdges) {
  // A constant input is smoothed to itself inside, and loses the weights that fall off at the edges.
  const std::vector<double> x(20, 2.0);
  const auto y = stencil(x);
  EXPECT_EQ(y[10], 2.0);
  EXPECT_EQ(y[0], 2.0 * (1 + 8 + 28 + 56 + 70) / 256.0);
  EXPECT_EQ(y[19], y[0]);
}

}  // namespace
}  // namespace aisp::ch08::async_copy
