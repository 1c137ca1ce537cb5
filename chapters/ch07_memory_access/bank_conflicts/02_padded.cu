// ch07:bank_conflicts:02_padded — one padding word per row of the shared tile.
//
// What changed: the shared array is float[32][33]. Nothing else.
// Why it helps: word (r, c) now lives at r * 33 + c, in bank (r + c) % 32. A column read (r = tx, fixed c)
// touches banks (tx + c) % 32: all 32 different, one wavefront. Row stores stay conflict-free. The price
// is 128 bytes per tile of unused shared memory, and rows that are no longer 16-byte aligned (so no
// 128-bit vector accesses along a row).
// Napkin math: 2 wavefronts per pass instead of 33; expect the shared-memory ceiling to be the bound,
// minus the barrier and load/store issue overheads of 4-byte accesses.
// Run: aisp bench run --targets ch07:bank_conflicts:02_padded
#include "chapters/ch07_memory_access/bank_conflicts/problem.hpp"

namespace aisp::ch07::bank_conflicts::v02 {

constexpr int k_per_thread = k_tile / k_rows;

__global__ void __launch_bounds__(k_tile * k_rows)
    tile_passes_padded_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t n,
                          std::int64_t passes) {
  __shared__ float tile[k_tile][k_tile + 1];  // one word of padding per row
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
      tile[y][tx] = v[j];
    }
    __syncthreads();
    // Read by columns: element (tx, y), a warp reads one column of 32 words. The registers now hold the
    // tile transposed.
#pragma unroll
    for (int j = 0; j < k_per_thread; ++j) {
      const int y = threadIdx.y + j * k_rows;
      v[j] = tile[tx][y];
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
  tile_passes_padded_kernel<<<tile_grid(a), dim3(k_tile, k_rows), 0, stream>>>(a.in, a.out, a.n, a.passes);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(BankConflictsProblem, launch, .step = 2, .slug = "padded", .kind = VariantKind::step,
                      .summary = "float[32][33] tile: the padding word spreads a column over all 32 banks");

}  // namespace aisp::ch07::bank_conflicts::v02
