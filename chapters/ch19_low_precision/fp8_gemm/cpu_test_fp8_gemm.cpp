// The host reference of ch19:fp8_gemm on hand-checkable cases.
#include <gtest/gtest.h>

#include "chapters/ch19_low_precision/fp8_gemm/reference.hpp"

namespace aisp::ch19::fp8_gemm {
namespace {

std::vector<std::uint8_t> codes(const std::vector<float>& values) {
  std::vector<std::uint8_t> out;
  for (const float v : values) out.push_back(e4m3_encode(v));
  return out;
}

TEST(Fp8GemmReference, PerTensorScalesMultiplyTheWholeProduct) {
  // A = [[1, 2], [3, 0.5]], B = [[4, -1], [0.25, 8]] (rows of B are columns of B^T); all exact in e4m3.
  const auto a = codes({1, 2, 3, 0.5f});
  const auto b = codes({4, -1, 0.25f, 8});
  const std::vector<double> c = gemm_fp8_tn(a, b, {0.5f}, {2.0f}, 2, 2, 2, 0);
  // A * B^T = [[1*4 + 2*-1, 1*0.25 + 2*8], [3*4 - 0.5, 0.75 + 4]] = [[2, 16.25], [11.5, 4.75]]; times 1.
  EXPECT_EQ(c, (std::vector<double>{2, 16.25, 11.5, 4.75}));
  const std::vector<double> c4 = gemm_fp8_tn(a, b, {0.5f}, {8.0f}, 2, 2, 2, 0);
  EXPECT_EQ(c4, (std::vector<double>{8, 65, 46, 19}));
}

TEST(Fp8GemmReference, BlockScalesApplyPerKBlockAndRowAndColumnBlock) {
  // m = 1, n = 128, k = 256: two K blocks. A's row is all 1 in block 0 and all 2 in block 1; B's rows are
  // all 1. Scales: sa[kb][0] = {1, 0.5}, sb[kb][0] = {2, 4}. c[j] = 128*1*1*2 + 128*2*0.5*4 = 256 + 512.
  const int m = 1, n = 128, k = 256;
  std::vector<std::uint8_t> a(k), b(static_cast<std::size_t>(n) * k, e4m3_encode(1.0f));
  for (int kk = 0; kk < k; ++kk) a[kk] = e4m3_encode(kk < 128 ? 1.0f : 2.0f);
  const std::vector<double> c = gemm_fp8_tn(a, b, {1.0f, 0.5f}, {2.0f, 4.0f}, m, n, k, 128);
  for (const double v : c) EXPECT_EQ(v, 768.0);
}

TEST(Fp8GemmReference, BlockScalesPickTheColumnBlockOfB) {
  // n = 256: columns 0..127 use sb[kb][0], columns 128..255 use sb[kb][1].
  const int m = 1, n = 256, k = 128;
  std::vector<std::uint8_t> a(k, e4m3_encode(0.5f)), b(static_cast<std::size_t>(n) * k, e4m3_encode(1.0f));
  const std::vector<double> c = gemm_fp8_tn(a, b, {1.0f}, {1.0f, 3.0f}, m, n, k, 128);
  EXPECT_EQ(c[0], 64.0);
  EXPECT_EQ(c[127], 64.0);
  EXPECT_EQ(c[128], 192.0);
  EXPECT_EQ(c[255], 192.0);
}

TEST(Fp8GemmReference, RoundsTheOutputOnceToBf16) {
  // 1 * 256 + 1 * 1 = 257 is exact in fp32, not in bf16: ties to the even 256.
  const auto a = codes({1, 1});
  const auto b = codes({256, 1});
  EXPECT_EQ(gemm_fp8_tn(a, b, {1.0f}, {1.0f}, 1, 1, 2, 0).front(), 256.0);
}

}  // namespace
}  // namespace aisp::ch19::fp8_gemm
