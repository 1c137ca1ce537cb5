// ch09:fused_norm — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "chapters/ch09_intensity_fusion/fused_norm/reference.hpp"

namespace aisp::ch09::fused_norm {
namespace {

TEST(Ch09FusedNormReference, RoundsToEightSignificantBitsTiesToEven) {
  // Spacing of bf16 in [1, 2) is 2^-7.
  EXPECT_EQ(round_to_bf16(1.0), 1.0);
  EXPECT_EQ(round_to_bf16(1.0 + 0x1.0p-7), 1.0 + 0x1.0p-7);              // representable
  EXPECT_EQ(round_to_bf16(1.0 + 0x1.0p-8), 1.0);                         // tie: down to even (1.0)
  EXPECT_EQ(round_to_bf16(1.0 + 3 * 0x1.0p-8), 1.0 + 2 * 0x1.0p-7);      // tie: up to even
  EXPECT_EQ(round_to_bf16(1.0 + 0x1.0p-8 + 0x1.0p-20), 1.0 + 0x1.0p-7);  // just above the tie
  EXPECT_EQ(round_to_bf16(-(1.0 + 0x1.0p-8 + 0x1.0p-20)), -(1.0 + 0x1.0p-7));
  EXPECT_EQ(round_to_bf16(255.5), 256.0);  // 255 needs 8 bits; 255.5 is a tie between 255 and 256
  EXPECT_EQ(round_to_bf16(254.5), 254.0);  // tie, 254 is even at this spacing (1)
  EXPECT_EQ(round_to_bf16(0.0), 0.0);
  EXPECT_EQ(round_to_bf16(3.0e-3), std::ldexp(std::nearbyint(std::ldexp(3.0e-3, 16)), -16));
}

TEST(Ch09FusedNormReference, OneRowByHand) {
  // h = {1, 2} + {2, 2} = {3, 4}; mean of squares (9 + 16) / 2 = 12.5.
  const auto out = add_rmsnorm_rows({1, 2}, {2, 2}, {1, 2}, 1, 2, 0.0);
  EXPECT_EQ(out.h[0], 3.0);
  EXPECT_EQ(out.h[1], 4.0);
  EXPECT_NEAR(out.y[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(out.y[1], 2 * 4 / std::sqrt(12.5), 1e-15);
}

TEST(Ch09FusedNormReference, TheNormReadsTheRoundedSum) {
  // 1 + 2^-8 rounds to 1 (a tie, to even): the row is then {1, 1}, whose norm is exactly {1, 1}. A norm of
  // the unrounded sum would give something else.
  const auto out = add_rmsnorm_rows({1, 1}, {0x1.0p-8, 0}, {1, 1}, 1, 2, 0.0);
  EXPECT_EQ(out.h[0], 1.0);
  EXPECT_EQ(out.h[1], 1.0);
  EXPECT_DOUBLE_EQ(out.y[0], 1.0);
  EXPECT_DOUBLE_EQ(out.y[1], 1.0);
}

TEST(Ch09FusedNormReference, RowsAreIndependentAndEpsKeepsAZeroRowFinite) {
  // Row 0 cancels to zero (y = 0, not NaN, thanks to eps); row 1 is a constant row, which RMSNorm maps to
  // the weight (no mean is subtracted).
  const auto out = add_rmsnorm_rows({1, -2, 5, 5}, {-1, 2, 0, 0}, {3, 4}, 2, 2, 1e-6);
  EXPECT_EQ(out.h[0], 0.0);
  EXPECT_EQ(out.h[1], 0.0);
  EXPECT_EQ(out.y[0], 0.0);
  EXPECT_EQ(out.y[1], 0.0);
  EXPECT_NEAR(out.y[2], 3.0, 1e-6);
  EXPECT_NEAR(out.y[3], 4.0, 1e-6);
}

}  // namespace
}  // namespace aisp::ch09::fused_norm
