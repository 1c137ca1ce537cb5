// The host reference of ch07:transpose on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "chapters/ch07_memory_access/transpose/reference.hpp"

namespace {

using aisp::ch07::transpose::transpose_reference;

TEST(TransposeReference, TwoByThreeBecomesThreeByTwo) {
  // in = [[1 2 3],
  //       [4 5 6]]   ->   out = [[1 4], [2 5], [3 6]]
  const std::vector<int> in = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(transpose_reference(in, 2, 3), (std::vector<int>{1, 4, 2, 5, 3, 6}));
}

TEST(TransposeReference, SingleRowBecomesSingleColumn) {
  const std::vector<int> in = {7, 8, 9, 10};
  EXPECT_EQ(transpose_reference(in, 1, 4), in);  // same bytes, different shape
}

TEST(TransposeReference, TwiceIsTheIdentityOnANonSquareMatrix) {
  std::vector<int> in(5 * 7);
  std::iota(in.begin(), in.end(), 0);
  const auto once = transpose_reference(in, 5, 7);
  EXPECT_NE(once, in);
  EXPECT_EQ(once[1], 7);  // out[0][1] = in[1][0]
  EXPECT_EQ(transpose_reference(once, 7, 5), in);
}

}  // namespace
