// ch06:ilp — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <vector>

#include "chapters/ch06_cuda_basics/ilp/reference.hpp"

namespace {

using namespace aisp::ch06::ilp;

TEST(Ch06IlpReference, ChainAppliesTheFmaItersTimes) {
  // v <- 0.5 v + 0.25 from 1: 0.75, 0.625, 0.5625 (all exact in fp32).
  EXPECT_EQ(chain(1.0f, 0, 0.5f, 0.25f), 1.0f);
  EXPECT_EQ(chain(1.0f, 1, 0.5f, 0.25f), 0.75f);
  EXPECT_EQ(chain(1.0f, 3, 0.5f, 0.25f), 0.5625f);
}

TEST(Ch06IlpReference, FmaRoundsOnceNotTwice) {
  // (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24 exactly with one rounding. A separate multiply would first round
  // 1 + 2^-11 + 2^-24 (half of fp32's 2^-23 spacing above 1 + 2^-11: a tie, to even) down to 1 + 2^-11,
  // and the result would be 0.
  const float u = 1.0f + 1.0f / 4096.0f;
  EXPECT_EQ(chain(u, 1, u, -(1.0f + 1.0f / 2048.0f)), 1.0f / 16777216.0f);
}

TEST(Ch06IlpReference, DefaultConstantsStayBoundedAndInputDependent) {
  const auto y = chains({-1.0, 0.0, 1.0}, 8192);
  EXPECT_EQ(y[2], 1.0);  // 1 is the fixed point: fma(1, a, b) = a + b = 1 exactly
  EXPECT_LT(y[0], y[1]);  // the map is increasing, so the order of inputs survives
  EXPECT_LT(y[1], y[2]);
  EXPECT_GT(y[0], 0.9);   // a^8192 ~ e^-4: -1 has moved most of the way to 1
}

}  // namespace
