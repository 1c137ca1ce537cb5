// CPU tests of ch08:divergence's host reference on hand-checkable values.
#include <gtest/gtest.h>

#include "chapters/ch08_occupancy_pipelines/divergence/reference.hpp"

namespace aisp::ch08::divergence {
namespace {

TEST(DivergenceReference, HornerMatchesHandExpansion) {
  // Three terms, non-negative branch: coefficients 1, 0.75, 0.625; y = (1 * x + 0.75) * x + 0.625.
  const float x = 0.5f;
  EXPECT_FLOAT_EQ(branchy_function(x, 3), (1.0f * x + 0.75f) * x + 0.625f);
  // Negative branch: coefficients -1, -0.625, -0.34375.
  const float z = -0.5f;
  EXPECT_FLOAT_EQ(branchy_function(z, 3), (-1.0f * z - 0.625f) * z - 0.34375f);
}

TEST(DivergenceReference, TheSignPicksTheRecurrence) {
  EXPECT_EQ(branchy_function(0.0f, 1), 1.0f);   // zero counts as non-negative: c0 = 1
  EXPECT_EQ(branchy_function(-0.0f, 1), 1.0f);  // -0 >= 0 too
  EXPECT_EQ(branchy_function(-1e-30f, 1), -1.0f);
}

TEST(DivergenceReference, StaysFiniteOverTheInputRange) {
  for (float x = -0.999f; x < 1.0f; x += 0.01f) {
    EXPECT_TRUE(std::isfinite(branchy_function(x, 256))) << x;
  }
  const auto y = evaluate({0.25, -0.25}, 2);
  EXPECT_EQ(y.size(), 2u);
  EXPECT_NE(y[0], y[1]);
}

}  // namespace
}  // namespace aisp::ch08::divergence
