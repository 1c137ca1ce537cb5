// The host reference of ch10:hgemm on hand-checkable cases, and the GEMM sizes of its axes.
#include <gtest/gtest.h>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"
#include "chapters/ch10_tensor_cores/hgemm/shapes.hpp"

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

void expect_shape(std::int64_t size, std::int64_t shape, int m, int n, int k) {
  const GemmShape got = gemm_shape(size, shape);
  EXPECT_EQ(got.m, m) << "size " << size << " shape " << shape;
  EXPECT_EQ(got.n, n) << "size " << size << " shape " << shape;
  EXPECT_EQ(got.k, k) << "size " << size << " shape " << shape;
}

TEST(HgemmShapes, SquareAndTheLlamaMlpGemms) {
  expect_shape(8192, 0, 8192, 8192, 8192);  // the square GEMM the stored results were measured at
  expect_shape(768, 0, 768, 768, 768);      // a multiple of 256 is enough for the square one
  // Llama-3-8B: hidden 4096, intermediate 14336.
  expect_shape(4096, 1, 4096, 14336, 4096);
  expect_shape(4096, 2, 4096, 4096, 14336);
  expect_shape(4096, 3, 256, 14336, 4096);
  expect_shape(8192, 2, 8192, 8192, 28672);
}

// The GPU tests run at the axis' test_value of size (512): every shape works there, and tiles by 256.
TEST(HgemmShapes, TheTestSizeWorksForEveryShapeWithoutTails) {
  for (std::int64_t shape = 0; shape < k_shape_count; ++shape) {
    const GemmShape s = gemm_shape(512, shape);
    EXPECT_EQ(s.m % k_size_multiple, 0) << shape;
    EXPECT_EQ(s.n % k_size_multiple, 0) << shape;
    EXPECT_EQ(s.k % k_size_multiple, 0) << shape;
  }
  expect_shape(512, 1, 512, 1792, 512);
  expect_shape(512, 3, 256, 1792, 512);
}

std::string usage_message(std::int64_t size, std::int64_t shape) {
  try {
    gemm_shape(size, shape);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected UsageError for size " << size << " shape " << shape;
  return {};
}

TEST(HgemmShapes, UnknownShapesAndSizesThatWouldNeedTailsAreUsageErrors) {
  const std::string unknown = usage_message(4096, 4);
  EXPECT_NE(unknown.find("unknown shape 4"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("3 decode-like M = 256"), std::string::npos) << unknown;  // lists the shapes
  EXPECT_EQ(unknown.find('\n'), std::string::npos);
  EXPECT_NE(usage_message(4096, -1).find("unknown shape -1"), std::string::npos);
  // 3.5 x 768 = 2688 is not a multiple of 256.
  const std::string odd = usage_message(768, 1);
  EXPECT_NE(odd.find("shape 1 needs size a multiple of 512"), std::string::npos) << odd;
  EXPECT_NE(usage_message(768, 3).find("multiple of 512"), std::string::npos);
  EXPECT_NE(usage_message(1000, 0).find("size must be a multiple of 256"), std::string::npos);
  EXPECT_NE(usage_message(65536, 0).find("up to 32768"), std::string::npos);
}

}  // namespace
}  // namespace aisp::ch10::hgemm
