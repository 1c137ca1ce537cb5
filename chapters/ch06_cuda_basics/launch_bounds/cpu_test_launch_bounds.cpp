// ch06:launch_bounds — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <vector>

#include "chapters/ch06_cuda_basics/launch_bounds/reference.hpp"

namespace {

using aisp::ch06::launch_bounds::mix_channels;

std::vector<double> identity() {
  std::vector<double> m(64, 0.0);
  for (int i = 0; i < 8; ++i) m[i * 8 + i] = 1.0;
  return m;
}

TEST(Ch06LaunchBoundsReference, IdentityKeepsEveryPixel) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8};
  EXPECT_EQ(mix_channels(x, identity()), x);
}

TEST(Ch06LaunchBoundsReference, RowsAreDotProducts) {
  std::vector<double> m(64, 0.0);
  for (int c = 0; c < 8; ++c) m[c] = 1.0;  // row 0 sums the channels
  m[8 + 7] = 2.0;                          // row 1 doubles channel 7
  m[63] = -0.5;                            // row 7 halves and negates channel 7
  const auto y = mix_channels({1, 2, 3, 4, 5, 6, 7, 8}, m);
  EXPECT_EQ(y, (std::vector<double>{36, 16, 0, 0, 0, 0, 0, -4}));
}

TEST(Ch06LaunchBoundsReference, SumsInChannelOrderInFp32) {
  // 2^24 + 1 - 2^24: in channel order (2^24, then +1 rounds away to even, then -2^24) the result is 0;
  // a reference summing in double, or in another order, would say 1 and fail the exact GPU result.
  std::vector<double> m(64, 0.0);
  m[0] = m[1] = m[2] = 1.0;
  const auto y = mix_channels({16777216.0, 1.0, -16777216.0, 0, 0, 0, 0, 0}, m);
  EXPECT_EQ(y[0], 0.0);
}

}  // namespace
