// ch19's quantization arithmetic (common/quant.hpp) on hand-checked values: e4m3 codes, rounding to
// nearest even, saturation, subnormals, scales, the symmetric integer quantizers and int4 packing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "chapters/ch19_low_precision/common/quant.hpp"

namespace aisp::ch19 {
namespace {

TEST(Ch19Quant, DecodesHandPickedE4m3Codes) {
  EXPECT_EQ(e4m3_decode(0x00), 0.0f);
  EXPECT_EQ(e4m3_decode(0x38), 1.0f);            // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(e4m3_decode(0x3C), 1.5f);            // 1.100b
  EXPECT_EQ(e4m3_decode(0x7E), 448.0f);          // 1.110b * 2^8: the largest finite value
  EXPECT_EQ(e4m3_decode(0xFE), -448.0f);
  EXPECT_EQ(e4m3_decode(0x08), 0x1p-6f);         // the smallest normal
  EXPECT_EQ(e4m3_decode(0x01), 0x1p-9f);         // the smallest subnormal
  EXPECT_EQ(e4m3_decode(0x07), 7 * 0x1p-9f);     // the largest subnormal
  EXPECT_EQ(e4m3_decode(0x77), 240.0f);          // exponent 14, mantissa 7 is finite: 1.875 * 2^7
  EXPECT_TRUE(std::isnan(e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_decode(0xFF)));
}

TEST(Ch19Quant, EncodingInvertsDecodingForEveryFiniteCode) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    if (code == 0x80) {                   // -0 keeps its sign
      EXPECT_EQ(e4m3_encode(-0.0f), 0x80);
      continue;
    }
    EXPECT_EQ(e4m3_encode(e4m3_decode(static_cast<std::uint8_t>(code))), code) << "code " << code;
  }
}

TEST(Ch19Quant, RoundsToNearestTiesToEven) {
  // Between 1 (0x38) and 1.125 (0x39) the spacing is 1/8: 1.0625 is a tie and goes to the even code 0x38.
  EXPECT_EQ(e4m3_encode(1.0625f), 0x38);
  // 1.1875 ties between 1.125 (0x39, odd) and 1.25 (0x3A, even): up.
  EXPECT_EQ(e4m3_encode(1.1875f), 0x3A);
  EXPECT_EQ(e4m3_encode(1.07f), 0x39);   // above the tie: up
  EXPECT_EQ(e4m3_encode(1.06f), 0x38);   // below: down
  // 1.9375 is a tie between 1.875 (0x3F, odd) and 2 (0x40, even): the mantissa carries into the exponent.
  EXPECT_EQ(e4m3_encode(1.9375f), 0x40);
  EXPECT_EQ(e4m3_encode(-1.0625f), 0xB8);
  // In the subnormals the spacing is 2^-9: 1.5 * 2^-9 ties between codes 1 and 2 and goes to 2; 2.5 * 2^-9
  // goes to 2 as well; 0.5 * 2^-9 goes to zero.
  EXPECT_EQ(e4m3_encode(1.5f * 0x1p-9f), 0x02);
  EXPECT_EQ(e4m3_encode(2.5f * 0x1p-9f), 0x02);
  EXPECT_EQ(e4m3_encode(0.5f * 0x1p-9f), 0x00);
  // 7.5 * 2^-9 ties between the largest subnormal (7, odd) and the smallest normal (8 = 2^-6): up.
  EXPECT_EQ(e4m3_encode(7.5f * 0x1p-9f), 0x08);
}

TEST(Ch19Quant, SaturatesInsteadOfOverflowing) {
  EXPECT_EQ(e4m3_encode(448.0f), 0x7E);
  EXPECT_EQ(e4m3_encode(460.0f), 0x7E);    // below the 464 midpoint: would round to 448 anyway
  EXPECT_EQ(e4m3_encode(500.0f), 0x7E);    // beyond: saturates (there is no 512 and no infinity)
  EXPECT_EQ(e4m3_encode(1e30f), 0x7E);
  EXPECT_EQ(e4m3_encode(-1e30f), 0xFE);
  EXPECT_EQ(e4m3_encode(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(e4m3_encode(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(e4m3_encode(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e4m3_encode(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  // Between 240 (0x77) and 256 (0x78) the spacing is 16: 250 rounds up, 247 down.
  EXPECT_EQ(e4m3_encode(250.0f), 0x78);
  EXPECT_EQ(e4m3_encode(247.0f), 0x77);
}

TEST(Ch19Quant, RelativeErrorIsAtMostHalfAnUlpInTheNormals) {
  // 3 mantissa bits: a normal value is off by at most 2^-4 of itself after rounding.
  for (float x = 0x1p-6f; x < 448.0f; x *= 1.0137f) {
    EXPECT_LE(std::fabs(e4m3_round(x) - x), 0x1p-4f * x) << x;
  }
}

TEST(Ch19Quant, ScaleMapsTheAbsoluteMaximumOntoTheFormatMaximum) {
  const std::vector<float> block = {0.5f, -3.5f, 2.0f, 0.0f};
  EXPECT_EQ(abs_max(block), 3.5f);
  const float scale = quant_scale(abs_max(block), k_e4m3_max);
  EXPECT_EQ(scale, 3.5f / 448.0f);
  // The largest magnitude lands exactly on +-448; nothing saturates.
  EXPECT_EQ(e4m3_encode(-3.5f / scale), 0xFE);
  EXPECT_EQ(quant_scale(0.0f, k_e4m3_max), 1.0f);  // an all-zero block
  EXPECT_EQ(quant_scale(127.0f, 127.0f), 1.0f);
}

TEST(Ch19Quant, SymmetricIntegerQuantizationRoundsToEvenAndClamps) {
  // int8, scale 0.5: 1.25 / 0.5 = 2.5 ties to 2; 1.75 / 0.5 = 3.5 ties to 4; -1.25 -> -2.
  EXPECT_EQ(quantize_symmetric(1.25f, 0.5f, 127), 2);
  EXPECT_EQ(quantize_symmetric(1.75f, 0.5f, 127), 4);
  EXPECT_EQ(quantize_symmetric(-1.25f, 0.5f, 127), -2);
  EXPECT_EQ(quantize_symmetric(63.5f, 0.5f, 127), 127);
  EXPECT_EQ(quantize_symmetric(100.0f, 0.5f, 127), 127);   // clamped, not wrapped
  EXPECT_EQ(quantize_symmetric(-100.0f, 0.5f, 127), -127);  // symmetric: -128 is never produced
  // int4 with a group's amax of 1.4: scale 0.2, so 1.4 -> 7, 0.3 -> 1.5 -> 2 (tie to even), -0.5 -> -2.5 -> -2.
  const float s4 = quant_scale(1.4f, 7.0f);
  EXPECT_EQ(quantize_symmetric(1.4f, s4, 7), 7);
  EXPECT_EQ(quantize_symmetric(-1.4f, s4, 7), -7);
  EXPECT_EQ(quantize_symmetric(9.0f, s4, 7), 7);
}

TEST(Ch19Quant, PacksInt4LowNibbleFirst) {
  EXPECT_EQ(pack_int4(1, 2), 0x21);
  EXPECT_EQ(pack_int4(-1, 7), 0x7F);
  EXPECT_EQ(pack_int4(-7, -8), 0x89);
  for (int low = -8; low <= 7; ++low) {
    for (int high = -8; high <= 7; ++high) {
      const std::uint8_t b = pack_int4(low, high);
      EXPECT_EQ(unpack_int4_low(b), low);
      EXPECT_EQ(unpack_int4_high(b), high);
    }
  }
}

}  // namespace
}  // namespace aisp::ch19
