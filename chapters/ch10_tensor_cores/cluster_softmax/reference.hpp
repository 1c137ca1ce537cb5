// ch10:cluster_softmax — the geometry the steps share, the partial-softmax algebra they rely on, and the
// host reference (ch08:softmax's: the same formula). Plain C++ (no CUDA headers) so that the CPU tests can
// check all of it; problem.hpp and the steps use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "chapters/ch08_occupancy_pipelines/softmax/reference.hpp"

namespace aisp::ch10::cluster_softmax {

using ch08::softmax::softmax_rows;  // the host reference: double, max subtracted before exp

// Steps 02 and 03 split every row into k_chunks chunks, one per block; step 03's blocks of a row form one
// thread block cluster of that many blocks, the portable maximum (CUDA programming guide, "Thread Block
// Clusters": 8 is guaranteed, larger sizes need cudaFuncAttributeNonPortableClusterSizeAllowed).
inline constexpr int k_chunks = 8;
inline constexpr int k_chunk_threads = 512;  // a chunk's block (steps 02 and 03)
inline constexpr int k_row_threads = 1024;   // a row's block (step 01)
// Step 03 keeps its chunk in registers: at most this many 16-byte vectors (8 bf16) per thread. 8 is 32
// registers of data; at 16 (64) ptxas spills under the 128 registers a 512-thread block allows.
inline constexpr int k_max_vectors_per_thread = 8;
// The longest row step 03 holds on chip: 8 blocks x 512 threads x 8 vectors x 8 bf16 = 2^18 (512 KiB):
// a 256K vocabulary (Gemma's 256,000) fits.
inline constexpr int k_max_cols = k_chunks * k_chunk_threads * k_max_vectors_per_thread * 8;

// A row of `cols` bf16 (cols % 8 == 0) is cols / 8 vectors. Chunk b holds vectors [first, end): equal
// chunks of ceil(vectors / k_chunks), the last ones shorter or empty.
struct VectorRange {
  int first = 0;
  int end = 0;
};
inline int chunk_vectors(int cols) { return (cols / 8 + k_chunks - 1) / k_chunks; }
inline VectorRange chunk_range(int cols, int chunk) {
  const int vectors = cols / 8, per = chunk_vectors(cols);
  return {std::min(chunk * per, vectors), std::min((chunk + 1) * per, vectors)};
}

// Vectors per thread step 03 is compiled for (1, 2, 4, 8): the fewest that hold a chunk; 0 when the row
// is longer than k_max_cols.
inline int vectors_per_thread(int cols) {
  const int need = (chunk_vectors(cols) + k_chunk_threads - 1) / k_chunk_threads;
  for (const int k : {1, 2, 4, 8}) {
    if (need <= k) return k;
  }
  return 0;
}

// What a chunk tells the rest of its row: its max m and s = sum over the chunk of exp(x - m). An empty
// chunk is {-inf, 0}.
struct Partial {
  double m = -std::numeric_limits<double>::infinity();
  double s = 0;
};

inline Partial chunk_partial(const double* x, int count) {
  Partial p;
  for (int i = 0; i < count; ++i) p.m = std::max(p.m, x[i]);
  for (int i = 0; i < count; ++i) p.s += std::exp(x[i] - p.m);
  return p;
}

// The row's max and normalizer from its chunks' partials: M = max m_b, S = sum s_b exp(m_b - M). Exact
// algebra (exp(x - M) = exp(x - m_b) exp(m_b - M)); an empty chunk adds nothing. Steps 02 and 03 do this
// in fp32 with __expf, on the device.
inline Partial combine(const std::vector<Partial>& parts) {
  Partial row;
  for (const Partial& p : parts) row.m = std::max(row.m, p.m);
  for (const Partial& p : parts) {
    if (p.s > 0) row.s += p.s * std::exp(p.m - row.m);
  }
  return row;
}

}  // namespace aisp::ch10::cluster_softmax
