// The ch09:sgemm host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include "chapters/ch09_intensity_fusion/sgemm/reference.hpp"

namespace aisp::ch09::sgemm {
namespace {

TEST(Ch09SgemmReference, TwoByTwo) {
  // [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50]
  const auto c = reference_gemm({1, 2, 3, 4}, {5, 6, 7, 8}, 2, 2, 2);
  EXPECT_EQ(c, (std::vector<double>{19, 22, 43, 50}));
}

TEST(Ch09SgemmReference, RectangularShapesKeepRowMajorIndexing) {
  // A 2x3, B 3x1: a mix-up of m, n or k would read out of the vectors or sum the wrong pairs.
  const auto c = reference_gemm({1, 0, 2, -1, 3, 1}, {4, 5, 6}, 2, 1, 3);
  EXPECT_EQ(c, (std::vector<double>{16, 17}));
  // A 1x2, B 2x3: an outer-product-like row.
  const auto d = reference_gemm({2, -1}, {1, 2, 3, 4, 5, 6}, 1, 3, 2);
  EXPECT_EQ(d, (std::vector<double>{-2, -1, 0}));
}

TEST(Ch09SgemmReference, IdentityLeavesTheOtherFactor) {
  const std::vector<double> id = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const std::vector<double> x = {0.5, -2, 3, 7, 1e-3, -4, 9, 8, 6};
  EXPECT_EQ(reference_gemm(id, x, 3, 3, 3), x);
  EXPECT_EQ(reference_gemm(x, id, 3, 3, 3), x);
}

TEST(Ch09SgemmReference, ToleranceGrowsWithTheReductionLength) {
  EXPECT_DOUBLE_EQ(gemm_atol(1 << 20), 1.0);
  EXPECT_LT(gemm_atol(512), gemm_atol(4096));
}

}  // namespace
}  // namespace aisp::ch09::sgemm
