// ch07:bank_conflicts:03_swizzled — XOR swizzle instead of padding.
//
// What changed: back to a float[32][32] array, but element (r, c) is stored at column c ^ r of row r.
// Why it helps: within a row, c -> c ^ r is a permutation, so row stores still hit 32 banks; a column
// read of elements (tx, y) for tx = 0..31 touches banks y ^ tx: a permutation of 0..31, one wavefront.
// Unlike padding it costs no shared memory and keeps rows 128-byte aligned; it is the layout trick that
// CUTLASS, ThunderKittens and the TMA unit (CU_TENSOR_MAP_SWIZZLE_128B) use, at 16-byte granularity.
// Napkin math: the same 2 wavefronts per pass as step 02; expect the same time, within noise: the point
// of this step is that the conflict-free layout needs no wasted memory, not more speed.
// Run: aisp bench run --targets ch07:bank_conflicts:03_swizzled
#include "chapters/ch07_memory_access/bank_conflicts/problem.hpp"

namespace aisp::ch07::bank_conflicts::v03 {

constexpr int k_per_thread = k_tile / k_rows;

__global__ void __launch_bounds__(k_tile * k_rows)
    tile_passes_swizzled_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t n,
                          std::int64_t passes) {
  __shared__ float tile[k_tile][k_tile];
  const int tx = threadIdx.x;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * k_tile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * k_tile;
  float v[k_per_thread];
#pragma unroll
  for (int j = 0; j < k_per_thread; ++j) {
    const std::int64_t r = row0 + threadIdx.y + j * k_rows, c = col0 + tx;
    v[j] = r < n && c < n ? in[r * n + c] : 0.0f;  // the edge tiles' missing elements ride along as zeros
  }
  for (std::int64_t p = 0; p < passes; ++p) {
    // Store by rows: element (y, tx) of the tile, a warp writes one row of 32 words.
#pragma unroll
    for (int j = 0; j < k_per_thread; ++j) {
      const int y = threadIdx.y + j * k_rows;
      tile[y][tx ^ y] = v[j];  // element (y, tx) lives in column tx ^ y of row y
    }
    __syncthreads();
    // Read by columns: element (tx, y), a warp reads one column of 32 words. The registers now hold the
    // tile transposed.
#pragma unroll
    for (int j = 0; j < k_per_thread; ++j) {
      const int y = threadIdx.y + j * k_rows;
      v[j] = tile[tx][y ^ tx];  // element (tx, y): the same rule
    }
    __syncthreads();
  }
  // Thread (tx, y) holds element (tx, y) of the tile after an odd number of passes, (y, tx) after an even
  // one: either way a warp writes one contiguous row of the output.
  const bool transposed = passes % 2 == 1;
#pragma unroll
  for (int j = 0; j < k_per_thread; ++j) {
    const std::int64_t y = threadIdx.y + j * k_rows;
    const std::int64_t r = transposed ? col0 + y : row0 + y;
    const std::int64_t c = transposed ? row0 + tx : col0 + tx;
    if (r < n && c < n) out[r * n + c] = v[j];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  tile_passes_swizzled_kernel<<<tile_grid(a), dim3(k_tile, k_rows), 0, stream>>>(a.in, a.out, a.n, a.passes);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(BankConflictsProblem, launch, .step = 3, .slug = "swizzled", .kind = VariantKind::optimized,
                      .summary = "XOR-swizzled 32x32 tile (column c ^ row): conflict-free with no padding");

}  // namespace aisp::ch07::bank_conflicts::v03
