// ch06:occupancy — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <vector>

#include "chapters/ch06_cuda_basics/occupancy/reference.hpp"

namespace {

using aisp::ch06::occupancy::affine;

TEST(Ch06OccupancyReference, AppliesAlphaAndBeta) {
  EXPECT_EQ(affine({0.0, 1.0, -2.0}), (std::vector<double>{-0.25, 1.25, -3.25}));
  EXPECT_EQ(affine({3.0}, 2.0f, 1.0f), std::vector<double>{7.0});
}

TEST(Ch06OccupancyReference, RoundsOnceLikeAnFfma) {
  // alpha = x = 1 + 2^-12, beta = -(1 + 2^-11): the fused result is 2^-24; a separate multiply rounds
  // (1 + 2^-12)^2 to 1 + 2^-11 first and gives 0.
  const float u = 1.0f + 1.0f / 4096.0f;
  EXPECT_EQ(affine({u}, u, -(1.0f + 1.0f / 2048.0f)).front(), 1.0 / 16777216.0);
}

}  // namespace
