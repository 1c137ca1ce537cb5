// The host reference of ch19:weight_only_gemv (reference.hpp) on hand-checked cases: the per-row int8 and
// per-group int4 quantization, the GEMV on dequantized weights, the error measure, the shape limits and
// the tolerance against the worst fp32 summation order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch19_low_precision/weight_only_gemv/reference.hpp"
#include "core/base/error.hpp"

namespace {

using namespace aisp::ch19::weight_only_gemv;

TEST(WeightOnlyGemvReference, Int8ScalesEachRowByItsOwnMaximum) {
  // Row 0: amax 127 * 2^-7, so scale = 2^-7 exactly and the codes are w * 128, rounded half to even.
  // Row 1: amax 2.54, scale 2.54f / 127 (0.02 rounded to float); 1.0 is 50 steps of it (49.99.. rounds up).
  // Row 2: all zero: scale 1, codes 0.
  const Shape s{.batch = 1, .n = 3, .k = 128, .bits = 8};
  std::vector<float> w(3 * 128, 0.0f);
  w[0] = 0.5f;            // 64
  w[1] = -0.9921875f;     // -127: the row's amax
  w[2] = 3 * 0x1p-8f;     // 1.5 -> 2 (ties to even)
  w[3] = 5 * 0x1p-8f;     // 2.5 -> 2 (ties to even)
  w[4] = -3 * 0x1p-8f;    // -1.5 -> -2
  w[128] = 2.54f;
  w[129] = 1.0f;
  const QuantizedWeights q = quantize_weights(s, w);
  ASSERT_EQ(q.scales.size(), 3u);
  EXPECT_EQ(q.scales[0], 0x1p-7f);
  EXPECT_EQ(q.scales[1], 2.54f / 127.0f);
  EXPECT_EQ(q.scales[2], 1.0f);
  EXPECT_EQ(q.codes[0], 64);
  EXPECT_EQ(q.codes[1], -127);
  EXPECT_EQ(q.codes[2], 2);
  EXPECT_EQ(q.codes[3], 2);
  EXPECT_EQ(q.codes[4], -2);
  EXPECT_EQ(q.codes[5], 0);
  EXPECT_EQ(q.codes[128], 127);
  EXPECT_EQ(q.codes[129], 50);
  EXPECT_TRUE(std::all_of(q.codes.begin() + 256, q.codes.end(), [](int c) { return c == 0; }));
}

TEST(WeightOnlyGemvReference, Int4ScalesEachGroupOf128) {
  // One row of two groups: group 0 has amax 0.875 (scale 0.125), group 1 amax 3.5 (scale 0.5).
  const Shape s{.batch = 1, .n = 1, .k = 256, .bits = 4};
  std::vector<float> w(256, 0.0f);
  w[0] = 0.875f;     // 7
  w[1] = 0.1875f;    // 1.5 -> 2
  w[2] = 0.3125f;    // 2.5 -> 2
  w[127] = -0.6f;    // -4.8 -> -5
  w[128] = -3.5f;    // -7
  w[129] = 0.75f;    // 1.5 -> 2
  w[255] = 1.25f;    // 2.5 -> 2
  const QuantizedWeights q = quantize_weights(s, w);
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_EQ(q.scales[0], 0.125f);
  EXPECT_EQ(q.scales[1], 0.5f);
  EXPECT_EQ(q.codes[0], 7);
  EXPECT_EQ(q.codes[1], 2);
  EXPECT_EQ(q.codes[2], 2);
  EXPECT_EQ(q.codes[127], -5);
  EXPECT_EQ(q.codes[128], -7);
  EXPECT_EQ(q.codes[129], 2);
  EXPECT_EQ(q.codes[255], 2);
  const std::vector<double> deq = dequantize(s, q);
  EXPECT_EQ(deq[127], -0.625);
  EXPECT_EQ(deq[128], -3.5);
  EXPECT_EQ(deq[255], 1.0);
}

TEST(WeightOnlyGemvReference, GemvOfAHandCheckedCase) {
  // Two batch rows, two weight rows, k = 128: x0 = all ones, x1 = +1 on even k and -1 on odd k.
  const Shape s{.batch = 2, .n = 2, .k = 128, .bits = 16};
  std::vector<double> x(2 * 128), w(2 * 128);
  for (int i = 0; i < 128; ++i) {
    x[i] = 1.0;
    x[128 + i] = i % 2 == 0 ? 1.0 : -1.0;
    w[i] = 0.5;                      // row 0: constant
    w[128 + i] = i < 64 ? 1.0 : 0.0; // row 1: the first half
  }
  const std::vector<double> y = gemv(s, x, w);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[0], 64.0);  // y[b = 0][row 0] = 128 * 0.5
  EXPECT_EQ(y[1], 64.0);  // y[0][1] = 64 ones
  EXPECT_EQ(y[2], 0.0);   // y[1][0]: alternating signs cancel
  EXPECT_EQ(y[3], 0.0);   // y[1][1]: 32 even minus 32 odd
}

TEST(WeightOnlyGemvReference, ErrorIsRelativeToTheRmsOfTheBf16Output) {
  // y_16 = {3, -4}: rms = sqrt(12.5). One output off by 0.5: max 0.5 / sqrt(12.5), rms sqrt(0.125) /
  // sqrt(12.5) = 0.1.
  const std::vector<double> y16 = {3.0, -4.0}, yq = {3.5, -4.0};
  const QuantError e = quant_error(yq, y16);
  EXPECT_DOUBLE_EQ(e.max_rel, 0.5 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(e.rms_rel, 0.1);
  const QuantError none = quant_error(y16, y16);
  EXPECT_EQ(none.max_rel, 0.0);
  EXPECT_EQ(none.rms_rel, 0.0);
}

TEST(WeightOnlyGemvReference, QuantizationErrorShrinksWithMoreBits) {
  // Uniform weights and inputs in [-1, 1) (the problem's): the measured errors follow the napkin math of
  // the README (rms ~ 1 / (2 * q_max) relative to the weights: ~0.07 at int4, ~0.004 at int8).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Shape s{.batch = 4, .n = 64, .k = 1024, .bits = 16};
  std::vector<float> wf(s.weight_count());
  for (auto& v : wf) v = dist(rng);
  std::vector<double> x(static_cast<std::size_t>(s.batch) * s.k);
  for (auto& v : x) v = dist(rng);
  const std::vector<double> w16(wf.begin(), wf.end());
  const std::vector<double> y16 = gemv(s, x, w16);
  s.bits = 8;
  const QuantError e8 = quant_error(gemv(s, x, dequantize(s, quantize_weights(s, wf))), y16);
  s.bits = 4;
  const QuantError e4 = quant_error(gemv(s, x, dequantize(s, quantize_weights(s, wf))), y16);
  EXPECT_NEAR(e4.rms_rel, 0.071, 0.01);
  EXPECT_NEAR(e8.rms_rel, 0.0039, 0.0006);
  EXPECT_GT(e4.max_rel, e4.rms_rel);
  EXPECT_GT(e8.max_rel, e8.rms_rel);
}

TEST(WeightOnlyGemvReference, RefusesShapesTheStepsDoNotHandle) {
  const auto shape = [](int batch, int n, int k, int bits) { return Shape{.batch = batch, .n = n, .k = k, .bits = bits}; };
  EXPECT_NO_THROW(check_shape(shape(16, 14336, 4096, 4)));
  EXPECT_NO_THROW(check_shape(shape(1, 1, 128, 8)));
  EXPECT_THROW(check_shape(shape(1, 1, 4096, 5)), aisp::UsageError);
  EXPECT_THROW(check_shape(shape(17, 1, 4096, 16)), aisp::UsageError);
  EXPECT_THROW(check_shape(shape(0, 1, 4096, 16)), aisp::UsageError);
  EXPECT_THROW(check_shape(shape(1, 1, 4000, 16)), aisp::UsageError);  // not a multiple of 128
  EXPECT_THROW(check_shape(shape(1, 0, 4096, 16)), aisp::UsageError);
}

TEST(WeightOnlyGemvReference, StorageSizesMatchTheFormats) {
  Shape s{.batch = 1, .n = 14336, .k = 4096, .bits = 16};
  EXPECT_EQ(s.weight_bytes(), 14336u * 4096u * 2u);
  EXPECT_EQ(s.scale_count(), 0u);
  s.bits = 8;
  EXPECT_EQ(s.weight_bytes(), 14336u * 4096u);
  EXPECT_EQ(s.scale_count(), 14336u);
  s.bits = 4;
  EXPECT_EQ(s.weight_bytes(), 14336u * 4096u / 2u);
  EXPECT_EQ(s.scale_count(), 14336u * 32u);
}

// One running fp32 sum over all of k: the worst order any step could use (the steps sum 32 lane partials
// of k / 32 terms each, then a shuffle tree).
float serial_fp32_dot(const std::vector<float>& x, const std::vector<float>& w) {
  float s = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) s = std::fma(x[i], w[i], s);
  return s;
}

TEST(WeightOnlyGemvTolerance, CoversTheWorstFp32SummationOrderWithMargin) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const int k : {4096, 14336}) {
    double worst = 0;
    for (int trial = 0; trial < 64; ++trial) {
      std::vector<float> x(k), w(k);
      for (auto& v : x) v = dist(rng);
      for (auto& v : w) v = dist(rng);
      double exact = 0;
      for (int i = 0; i < k; ++i) exact += static_cast<double>(x[i]) * w[i];
      worst = std::max(worst, std::fabs(static_cast<double>(serial_fp32_dot(x, w)) - exact));
    }
    EXPECT_LT(worst, gemv_atol(k) / 8) << "k = " << k;
    // Still tight: under 1e-3 of a typical |y| (sqrt(k / 9)), so a wrong sum cannot hide in it.
    EXPECT_LT(gemv_atol(k), 1e-3 * std::sqrt(k / 9.0)) << "k = " << k;
  }
}

}  // namespace
