// The host reference of ch11:stream_ordered_alloc's step.
#include <gtest/gtest.h>

#include <cmath>

#include "chapters/ch11_streams/stream_ordered_alloc/reference.hpp"

namespace {

using namespace aisp::ch11::stream_ordered_alloc;

TEST(StreamOrderedAllocReference, FollowsEachOpByHand) {
  // x = 0.5: t1 = 0.75 - 0.25 = 0.5 > 0, kept; out = 0.5 * 0.5.
  EXPECT_EQ(step_reference(0.5f), 0.25f);
  // x = -0.5: t1 = -1.0 < 0, times 1/8 = -0.125; out = -0.125 * -0.5.
  EXPECT_EQ(step_reference(-0.5f), 0.0625f);
  // x = 0: t1 = -0.25 -> -0.03125; out = -0.03125 * 0 = -0 (equal to 0 under the gate's |out - ref| test).
  EXPECT_EQ(step_reference(0.0f), 0.0f);
  // The kink of leaky_relu sits at x = 1/6, where t1 changes sign.
  EXPECT_GT(affine(0.17f), 0.0f);
  EXPECT_LT(affine(0.16f), 0.0f);
}

TEST(StreamOrderedAllocReference, TheAffineMapRoundsOnce) {
  // 1.5 x - 0.25 with one rounding: for x = 1/3 (rounded), fma and a separate multiply-add may differ in
  // the last bit; the reference must be the fma, which is what the kernels use (__fmaf_rn).
  const float x = 1.0f / 3.0f;
  EXPECT_EQ(affine(x), static_cast<float>(std::fma(static_cast<double>(k_scale), static_cast<double>(x),
                                                   static_cast<double>(k_shift))));
}

TEST(StreamOrderedAllocReference, OutputDependsOnTheInput) {
  int distinct = 0;
  float last = step_reference(-1.0f);
  for (int i = 1; i <= 200; ++i) {
    const float v = step_reference(-1.0f + static_cast<float>(i) / 100.0f);
    distinct += v != last;
    last = v;
  }
  EXPECT_GE(distinct, 199);  // at most one repeat, around the kink
}

TEST(StreamOrderedAllocReference, StaysBoundedOnTheInputRange) {
  for (int i = 0; i < 2000; ++i) {
    const float x = -1.0f + static_cast<float>(i) / 1000.0f;
    const float y = step_reference(x);
    EXPECT_TRUE(std::isfinite(y));
    EXPECT_LE(std::fabs(y), 1.25f) << x;  // |1.5 x - 0.25| <= 1.75 at worst, leaky side 1/8 of it
  }
}

}  // namespace
