// The host reference of ch10:hgemm on hand-checkable cases.
#include <gtest/gtest.h>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"

namespace aisp::ch10::hgemm {
namespace {

TEST(HgemmReference, RoundsToNearestBf16TiesToEven) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to the even one, 1.
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f), 1.0f);
  // 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  // Above the tie rounds up, below rounds down.
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f + 0x1p-12f), 1.0f + 0x1p-7f);
  EXPECT_EQ(round_to_bf16(-(1.0f + 0x1p-9f)), -1.0f);
}

TEST(HgemmReference, MultipliesByBTransposed) {
  // A = [[1, 2], [3, 4]] (2 x 2), B = [[5, 6], [7, 8], [1, 0]] (3 x 2, rows are columns of B^T).
  const std::vector<double> a = {1, 2, 3, 4};
  const std::vector<double> b = {5, 6, 7, 8, 1, 0};
  const std::vector<double> c = gemm_tn(a, b, 2, 3, 2);
  const std::vector<double> want = {17, 23, 1, 39, 53, 3};
  EXPECT_EQ(c, want);
}

TEST(HgemmReference, RoundsTheOutputOnceToBf16) {
  // 257 = 1 + 256 is exact in fp32 but not in bf16 (8 bits): it ties between 256 and 258, goes to 256.
  const std::vector<double> a = {1, 1};
  const std::vector<double> b = {1, 256};
  EXPECT_EQ(gemm_tn(a, b, 1, 1, 2).front(), 256.0);
  // 259 is a tie too, between 258 (odd last bit) and 260 (even): 260.
  const std::vector<double> b2 = {3, 256};
  EXPECT_EQ(gemm_tn(a, b2, 1, 1, 2).front(), 260.0);
}

TEST(HgemmReference, IdentityReproducesTheInput) {
  const int n = 5, k = 5;
  std::vector<double> eye(n * k, 0.0), a(3 * k);
  for (int i = 0; i < n; ++i) eye[i * k + i] = 1;
  for (int i = 0; i < 3 * k; ++i) a[i] = 0.25 * (i - 7);
  EXPECT_EQ(gemm_tn(a, eye, 3, n, k), a);
}

}  // namespace
}  // namespace aisp::ch10::hgemm
