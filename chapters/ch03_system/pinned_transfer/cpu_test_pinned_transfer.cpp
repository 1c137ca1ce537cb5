// The host reference and the chunking of ch03:pinned_transfer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "chapters/ch03_system/pinned_transfer/reference.hpp"

namespace {

using namespace aisp::ch03::pinned_transfer;

TEST(PinnedTransferReference, ZeroFmaIsAPlainCopy) {
  for (const float x : {-1.0f, -0.25f, 0.0f, 0.5f, 0.999f}) EXPECT_EQ(consume_reference(x, 0), x);
}

TEST(PinnedTransferReference, FollowsTheAffineMapItStandsFor) {
  // y = decay^k x + (1 - decay^k): the fma chain agrees with the closed form to fp32 accuracy.
  for (const int k : {1, 64, 1024}) {
    for (const float x : {-1.0f, 0.3f, 0.9f}) {
      const double dk = std::pow(static_cast<double>(k_decay), k);
      const double closed = dk * x + static_cast<double>(k_offset) * (1 - dk) / (1 - static_cast<double>(k_decay));
      EXPECT_NEAR(consume_reference(x, k), closed, 1e-5 + 4e-7 * k) << "k " << k << " x " << x;
    }
  }
}

TEST(PinnedTransferReference, OutputStillDependsOnTheInput) {
  // The gate's second seed must change the output: at the default 1024 fmas, y keeps ~90% of x.
  EXPECT_GT(std::fabs(consume_reference(0.5f, 1024) - consume_reference(-0.5f, 1024)), 0.8f);
  EXPECT_NE(consume_reference(0.5f, 4096), consume_reference(0.5000001f, 4096));
}

TEST(PinnedTransferChunks, CoverEveryElementOnceInOrder) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{16}, (std::size_t{1} << 20) + 3}) {
    for (const std::size_t chunks : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{16}}) {
      const auto c = split_into_chunks(n, chunks);
      ASSERT_FALSE(c.empty());
      EXPECT_LE(c.size(), chunks);
      std::size_t next = 0;
      for (const Chunk& piece : c) {
        EXPECT_EQ(piece.first, next) << "n " << n << " chunks " << chunks;
        EXPECT_GT(piece.count, 0u);
        next = piece.first + piece.count;
      }
      EXPECT_EQ(next, n) << "n " << n << " chunks " << chunks;
    }
  }
}

TEST(PinnedTransferChunks, AreEvenExceptTheLast) {
  const auto c = split_into_chunks((std::size_t{1} << 20) + 3, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].count, c[1].count);
  EXPECT_LT(c[2].count, c[0].count);
  EXPECT_EQ(split_into_chunks(std::size_t{1} << 28, 16).size(), 16u);
  EXPECT_EQ(split_into_chunks(3, 16).size(), 3u);  // fewer elements than chunks: one element each
  EXPECT_TRUE(split_into_chunks(0, 4).empty());
}

}  // namespace
