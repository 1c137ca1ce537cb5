// The host twin of the runner's FP8 row quantization (serving/gpu/fp8_reference.hpp), on hand-checked
// values: the per-row scale (amax / 448), the codes of a row, the all-zero row, per-row independence, and
// the bound every dequantized value keeps. The GPU test LlamaRunnerFp8.QuantizedRowsMatchTheHost then holds
// the device kernel to this bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "serving/gpu/fp8_reference.hpp"

namespace aisp::serving::gpu {
namespace {

TEST(Fp8Reference, ScalesEachRowByItsLargestMagnitude) {
  // Row 0: amax 4, so scale 4 / 448 and the elements map to 112, -224, 56 and 448, all exact in e4m3
  // (1.75 x 2^6, 2^7, 2^5, 2^8: exponent fields 13, 14, 12, 15, mantissa 6). Row 1: amax 0.5, scale
  // 0.5 / 448: 0, 224, -448, 112.
  const std::vector<float> values = {1.0f, -2.0f, 0.5f, 4.0f, 0.0f, 0.25f, -0.5f, 0.125f};
  const QuantizedRows q = quantize_rows_host(values, 2, 4);
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_EQ(q.scales[0], 4.0f / 448.0f);
  EXPECT_EQ(q.scales[1], 0.5f / 448.0f);
  const std::vector<std::uint8_t> want = {0x6E, 0xF6, 0x66, 0x7E, 0x00, 0x76, 0xFE, 0x6E};
  EXPECT_EQ(q.codes, want);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(dequantized(q, 0, 4, i), values[static_cast<std::size_t>(i)]);
    EXPECT_FLOAT_EQ(dequantized(q, 1, 4, i), values[static_cast<std::size_t>(4 + i)]);
  }
}

TEST(Fp8Reference, AnAllZeroRowTakesScaleOne) {
  const std::vector<float> values(16, 0.0f);
  const QuantizedRows q = quantize_rows_host(values, 2, 8);
  EXPECT_EQ(q.scales, std::vector<float>(2, 1.0f));
  EXPECT_EQ(q.codes, std::vector<std::uint8_t>(16, 0x00));
}

TEST(Fp8Reference, RoundsToNearestEvenBetweenCodes) {
  // amax 448 gives scale 1: the values are quantized as they are. In [16, 32) the step is 2 (exponent
  // field 11): 17 lies halfway between 16 (code 0x58) and 18 (0x59) and goes to the even code, 16; 19,
  // halfway between 18 and 20 (0x5A), goes to 20.
  const std::vector<float> values = {448.0f, 17.0f, 19.0f, -17.0f};
  const QuantizedRows q = quantize_rows_host(values, 1, 4);
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(q.codes, (std::vector<std::uint8_t>{0x7E, 0x58, 0x5A, 0xD8}));
}

TEST(Fp8Reference, RowsAreIndependentAndScaleByPowersOfTwoExactly) {
  // A row times 2^e has the scale times 2^e and the same codes, whatever the other rows hold: the scale is
  // per row (per token for activations, per output channel for weights), not per tensor.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int k = 64;
  std::vector<float> values(3 * k);
  for (int i = 0; i < k; ++i) {
    const float v = normal(rng);
    values[static_cast<std::size_t>(i)] = v;
    values[static_cast<std::size_t>(k + i)] = std::ldexp(v, 9);
    values[static_cast<std::size_t>(2 * k + i)] = std::ldexp(v, -7);
  }
  const QuantizedRows q = quantize_rows_host(values, 3, k);
  EXPECT_EQ(q.scales[1], std::ldexp(q.scales[0], 9));
  EXPECT_EQ(q.scales[2], std::ldexp(q.scales[0], -7));
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(q.codes[static_cast<std::size_t>(k + i)], q.codes[static_cast<std::size_t>(i)]);
    EXPECT_EQ(q.codes[static_cast<std::size_t>(2 * k + i)], q.codes[static_cast<std::size_t>(i)]);
  }
}

TEST(Fp8Reference, DequantizedValuesStayWithinHalfAStep) {
  // e4m3 keeps 3 mantissa bits: a normal value is off by at most 2^-4 of itself, and below the smallest
  // normal (2^-6 x scale) by at most half the subnormal step, 2^-10 x scale. The row's largest magnitude
  // lands on 448 exactly, up to the one rounding of amax / 448.
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int rows = 8, k = 256;
  std::vector<float> values(static_cast<std::size_t>(rows) * k);
  for (float& v : values) v = normal(rng) * 3.0f;
  const QuantizedRows q = quantize_rows_host(values, rows, k);
  for (int r = 0; r < rows; ++r) {
    const float scale = q.scales[static_cast<std::size_t>(r)];
    float largest = 0.0f;
    for (int i = 0; i < k; ++i) {
      const float x = values[static_cast<std::size_t>(r) * k + i];
      const float err = std::fabs(dequantized(q, r, k, i) - x);
      EXPECT_LE(err, std::max(std::ldexp(std::fabs(x), -4), std::ldexp(scale, -10)) * 1.0001f)
          << "row " << r << " element " << i;
      largest = std::max(largest, std::fabs(ch19::e4m3_decode(q.codes[static_cast<std::size_t>(r) * k + i])));
    }
    EXPECT_EQ(largest, 448.0f) << "row " << r;
  }
}

}  // namespace
}  // namespace aisp::serving::gpu
