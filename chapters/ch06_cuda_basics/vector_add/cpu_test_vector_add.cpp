// ch06:vector_add — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <vector>

#include "chapters/ch06_cuda_basics/vector_add/reference.hpp"

namespace {

using aisp::ch06::vector_add::add;

TEST(Ch06VectorAddReference, AddsElementwise) {
  EXPECT_EQ(add({1.0, -2.5, 0.0}, {2.0, 0.5, -0.0}), (std::vector<double>{3.0, -2.0, 0.0}));
}

TEST(Ch06VectorAddReference, RoundsToFp32) {
  // 1 + 2^-24 is not an fp32 value: it ties between 1 and 1 + 2^-23 and rounds to even, i.e. to 1.
  // A reference computing in double would say 1 + 2^-24 and wrongly fail an exact GPU result.
  const double tiny = 1.0 / (1 << 24);
  EXPECT_EQ(add({1.0}, {tiny}).front(), 1.0);
  EXPECT_EQ(add({1.0}, {3 * tiny}).front(), 1.0 + 4 * tiny);  // 1 + 3*2^-24 ties up to the even 1 + 2^-22
}

TEST(Ch06VectorAddReference, EmptyAndLength) {
  EXPECT_TRUE(add({}, {}).empty());
  EXPECT_EQ(add(std::vector<double>(7, 1.0), std::vector<double>(7, 1.0)).size(), 7u);
}

}  // namespace
