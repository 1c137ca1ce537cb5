// ch06:launch_bounds — the host reference on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "chapters/ch06_cuda_basics/launch_bounds/reference.hpp"

namespace {

using aisp::ch06::launch_bounds::gather_multiplier;
using aisp::ch06::launch_bounds::gather_pixels;
using aisp::ch06::launch_bounds::gather_source;
using aisp::ch06::launch_bounds::gather_table_pixels;
using aisp::ch06::launch_bounds::lookup_source;
using aisp::ch06::launch_bounds::block_remap_source;
using aisp::ch06::launch_bounds::source_pixel;
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

// gather=1 must read every input pixel exactly once (the declared bytes assume it): the map is a
// permutation at the test size (odd, prime), at powers of two (the default 2^25 is one) and at sizes with
// small factors, where the multiplier has to step past common divisors.
TEST(Ch06LaunchBoundsReference, GatherIsAPermutation) {
  for (const std::uint64_t pixels : {1ull, 2ull, 3ull, 12ull, 1000ull, 4096ull, 100003ull, 3ull * 5 * 7 * 11 * 13}) {
    const std::uint64_t mult = gather_multiplier(pixels);
    EXPECT_EQ(std::gcd(mult, pixels), 1u) << pixels;
    std::vector<char> seen(pixels, 0);
    for (std::uint64_t p = 0; p < pixels; ++p) {
      const std::uint64_t src = gather_source(p, pixels, mult);
      ASSERT_LT(src, pixels);
      EXPECT_EQ(seen[src], 0) << "pixel " << src << " read twice at pixels=" << pixels;
      seen[src] = 1;
    }
  }
}

TEST(Ch06LaunchBoundsReference, GatherScattersNeighbours) {
  // Neighbouring outputs must read far-apart pixels (each its own DRAM sector), not p, p+1, ...
  const std::uint64_t pixels = std::uint64_t{1} << 25;
  const std::uint64_t mult = gather_multiplier(pixels);
  const std::uint64_t a = gather_source(1000, pixels, mult), b = gather_source(1001, pixels, mult);
  const std::uint64_t gap = a > b ? a - b : b - a;
  EXPECT_GT(std::min(gap, pixels - gap), pixels / 4);
}

TEST(Ch06LaunchBoundsReference, GatherMovesWholePixels) {
  // 3 pixels: output pixel p takes input pixel (p * mult) % 3, all 8 channels of it.
  std::vector<double> x(24);
  std::iota(x.begin(), x.end(), 0.0);
  const std::uint64_t mult = gather_multiplier(3);
  const auto g = gather_pixels(x, 1, mult, 3);
  for (std::uint64_t p = 0; p < 3; ++p) {
    for (int c = 0; c < 8; ++c) EXPECT_EQ(g[p * 8 + c], x[gather_source(p, 3, mult) * 8 + c]);
  }
  EXPECT_EQ(g[0], 0.0);  // pixel 0 always maps to itself
}

}  // namespace

TEST(Ch06LaunchBoundsReference, LookupStaysInItsTable) {
  // gather=2: every source lies in the table of the first 2^16 pixels, neighbours still far apart, and
  // the table is every pixel below 2^16 pixels (then it is gather=1's permutation).
  const std::uint64_t pixels = std::uint64_t{1} << 25;
  const std::uint64_t mult = gather_multiplier(pixels), table = gather_table_pixels(pixels);
  EXPECT_EQ(table, std::uint64_t{1} << 16);
  std::vector<char> seen(table, 0);
  for (std::uint64_t p = 0; p < 4 * table; ++p) {
    const std::uint64_t src = lookup_source(p, pixels, mult, table);
    ASSERT_LT(src, table);
    seen[src] = 1;
  }
  EXPECT_GT(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(table / 2));  // spread over the table
  EXPECT_EQ(gather_table_pixels(1000), 1000u);
  std::vector<double> x(8 * 5);
  std::iota(x.begin(), x.end(), 0.0);
  const auto g = gather_pixels(x, 2, gather_multiplier(5), 2);
  for (std::uint64_t p = 0; p < 5; ++p) {
    EXPECT_LT(g[p * 8], 16.0);  // pixel 0 or 1
    EXPECT_EQ(g[p * 8], x[lookup_source(p, 5, gather_multiplier(5), 2) * 8]);
  }
}

TEST(Ch06LaunchBoundsReference, BlockRemapMovesWholeRunsOf32) {
  // gather=3: every input pixel read once, runs of 32 kept contiguous, runs far apart, the tail in place.
  const std::uint64_t pixels = 32 * 1000 + 7;
  const std::uint64_t mult = gather_multiplier(pixels / 32);
  std::vector<char> seen(pixels, 0);
  for (std::uint64_t p = 0; p < pixels; ++p) {
    const std::uint64_t src = source_pixel(3, p, pixels, mult, pixels);
    ASSERT_EQ(src, block_remap_source(p, pixels, mult));
    ASSERT_LT(src, pixels);
    EXPECT_EQ(seen[src], 0) << "pixel " << src << " read twice";
    seen[src] = 1;
    if (p % 32 != 0 && p < 32 * 1000) EXPECT_EQ(src, block_remap_source(p - 1, pixels, mult) + 1);
  }
  EXPECT_EQ(block_remap_source(pixels - 1, pixels, mult), pixels - 1);
  const std::uint64_t a = block_remap_source(32 * 10, pixels, mult), b = block_remap_source(32 * 11, pixels, mult);
  EXPECT_GT(a > b ? a - b : b - a, 32u * 100);
}
