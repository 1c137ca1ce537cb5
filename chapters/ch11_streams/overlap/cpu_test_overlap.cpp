// The host reference and the chunk plan of ch11:overlap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "chapters/ch11_streams/overlap/reference.hpp"

namespace {

using namespace aisp::ch11::overlap;

TEST(OverlapReference, LowDegreesAreExact) {
  EXPECT_EQ(horner_geometric(0.375f, 0), 1.0f);
  EXPECT_EQ(horner_geometric(0.375f, 1), 1.375f);
  EXPECT_EQ(horner_geometric(-0.5f, 2), 0.75f);  // 1 - 1/2 + 1/4
  EXPECT_EQ(horner_geometric(0.25f, 3), 1.328125f);  // 1 + 1/4 + 1/16 + 1/64
}

TEST(OverlapReference, MatchesTheClosedFormOnTheInputRange) {
  // The recurrence contracts by |x| <= 1/2 per step, so its rounding error stays within a few units of
  // the last place whatever the degree: 4 ulps (4 x 2^-24 relative) bounds it with margin.
  const double rel = 4.0 / 16777216.0;
  for (const int k : {1, 7, 64, 1024, 4096}) {
    for (int i = 0; i < 1000; ++i) {
      const float x = -0.5f + static_cast<float>(i) / 1000.0f;  // [-1/2, 1/2)
      const double want = geometric_closed_form(static_cast<double>(x), k);
      EXPECT_NEAR(static_cast<double>(horner_geometric(x, k)), want, rel * std::fabs(want)) << "x " << x << " k " << k;
    }
  }
}

TEST(OverlapReference, OutputDependsOnTheInput) {
  // At the default degree x^(k+1) underflows to nothing, and p(x) -> 1 / (1 - x): still one value per x.
  EXPECT_NE(horner_geometric(0.25f, 1024), horner_geometric(-0.25f, 1024));
  EXPECT_NE(horner_geometric(0.25f, 1024), horner_geometric(0.2501f, 1024));
  EXPECT_NEAR(horner_geometric(0.25f, 1024), 4.0f / 3.0f, 1e-6f);
}

// Every element in exactly one chunk, in order, chunks of ceil(n / chunks) with only the last shorter.
void expect_partition(std::size_t n, int chunks) {
  std::size_t next = 0;
  const std::size_t size = (n + static_cast<std::size_t>(chunks) - 1) / static_cast<std::size_t>(chunks);
  for (int c = 0; c < chunks; ++c) {
    const ChunkRange r = chunk_range(n, chunks, c);
    if (r.count == 0) {
      EXPECT_EQ(next, n) << "an empty chunk before the end, n " << n << " chunks " << chunks << " c " << c;
      continue;
    }
    EXPECT_EQ(r.begin, next) << "n " << n << " chunks " << chunks << " c " << c;
    EXPECT_LE(r.count, size);
    if (r.begin + r.count < n) {
      EXPECT_EQ(r.count, size) << "only the last chunk may be short";
    }
    next = r.begin + r.count;
  }
  EXPECT_EQ(next, n) << "n " << n << " chunks " << chunks;
}

TEST(OverlapChunks, PartitionTheBuffer) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{65539}, std::size_t{1} << 27}) {
    for (const int chunks : {1, 3, 4, 6, 16, 17, 1000}) expect_partition(n, chunks);
  }
}

TEST(OverlapChunks, TheTestSizeHasAnUnevenLastChunk) {
  const std::size_t n = (std::size_t{1} << 16) + 3;
  const ChunkRange first = chunk_range(n, 6, 0), last = chunk_range(n, 6, 5);
  EXPECT_EQ(first.count, 10924u);
  EXPECT_EQ(last.begin + last.count, n);
  EXPECT_LT(last.count, first.count);
}

TEST(OverlapChunks, MoreChunksThanElementsLeavesTheRestEmpty) {
  EXPECT_EQ(chunk_range(3, 8, 2).count, 1u);
  EXPECT_EQ(chunk_range(3, 8, 3).count, 0u);
  EXPECT_EQ(chunk_range(3, 8, 7).begin, 3u);
}

}  // namespace
