// ch10:cluster_softmax — the geometry and the algebra the split steps rely on, on the host: the chunks
// cover every row exactly once, the register budget of step 03 holds every admitted row, and a row's
// softmax from its chunks' (max, sum) pairs is the softmax of the whole row.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "chapters/ch10_tensor_cores/cluster_softmax/reference.hpp"

namespace aisp::ch10::cluster_softmax {
namespace {

TEST(Ch10ClusterSoftmaxGeometry, ChunksCoverTheRowOnce) {
  for (const int cols : {8, 16, 64, 8000, 128256, 256000, k_max_cols}) {
    int next = 0;
    for (int b = 0; b < k_chunks; ++b) {
      const VectorRange r = chunk_range(cols, b);
      EXPECT_EQ(r.first, next) << cols << " chunk " << b;
      EXPECT_LE(r.first, r.end) << cols << " chunk " << b;
      EXPECT_LE(r.end - r.first, chunk_vectors(cols));
      next = r.end;
    }
    EXPECT_EQ(next, cols / 8) << cols << ": the last chunk ends at the row's end";
  }
  // A short row leaves chunks empty: 2 vectors, chunks 0 and 1 hold one each.
  EXPECT_EQ(chunk_range(16, 1).end - chunk_range(16, 1).first, 1);
  EXPECT_EQ(chunk_range(16, 2).end - chunk_range(16, 2).first, 0);
}

TEST(Ch10ClusterSoftmaxGeometry, StepThreeHoldsEveryAdmittedRow) {
  EXPECT_EQ(k_max_cols, 1 << 18);
  EXPECT_EQ(vectors_per_thread(8000), 1);     // 125 vectors a chunk, 512 threads
  EXPECT_EQ(vectors_per_thread(128256), 4);   // 2004 vectors a chunk
  EXPECT_EQ(vectors_per_thread(256000), 8);   // 4000
  EXPECT_EQ(vectors_per_thread(k_max_cols), 8);
  EXPECT_EQ(vectors_per_thread(k_max_cols + 8), 0) << "longer than the registers hold: refused by the problem";
  for (const int cols : {8, 4096 * 8, 128256, k_max_cols}) {
    const int k = vectors_per_thread(cols);
    ASSERT_GT(k, 0) << cols;
    EXPECT_GE(k * k_chunk_threads, chunk_vectors(cols)) << cols << ": every vector of a chunk has a thread";
  }
}

TEST(Ch10ClusterSoftmaxAlgebra, PairsOfChunksGiveTheRowsNormalizer) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> value(-8.0, 8.0);
  for (const int cols : {16, 200, 8000}) {
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (double& v : row) v = value(rng);
    std::vector<Partial> parts;
    for (int b = 0; b < k_chunks; ++b) {
      const VectorRange r = chunk_range(cols, b);
      parts.push_back(chunk_partial(row.data() + 8 * r.first, 8 * (r.end - r.first)));
    }
    const Partial whole = chunk_partial(row.data(), cols);
    const Partial merged = combine(parts);
    EXPECT_EQ(merged.m, whole.m) << cols;
    EXPECT_NEAR(merged.s, whole.s, 1e-12 * whole.s) << cols;
    // The softmax written from the merged pair is the host reference's.
    const std::vector<double> want = softmax_rows(row, 1, static_cast<std::size_t>(cols));
    for (int c = 0; c < cols; ++c) {
      EXPECT_NEAR(std::exp(row[static_cast<std::size_t>(c)] - merged.m) / merged.s, want[static_cast<std::size_t>(c)],
                  1e-15)
          << cols << " col " << c;
    }
  }
}

TEST(Ch10ClusterSoftmaxAlgebra, EmptyChunksAddNothing) {
  const Partial empty = chunk_partial(nullptr, 0);
  EXPECT_TRUE(std::isinf(empty.m) && empty.m < 0);
  EXPECT_EQ(empty.s, 0.0);
  const std::vector<double> x = {1.0, 3.0};
  const Partial one = chunk_partial(x.data(), 2);
  const Partial merged = combine({empty, one, empty});
  EXPECT_EQ(merged.m, 3.0);
  EXPECT_DOUBLE_EQ(merged.s, one.s);
  EXPECT_DOUBLE_EQ(one.s, 1.0 + std::exp(-2.0));
}

}  // namespace
}  // namespace aisp::ch10::cluster_softmax
