// ch07:bank_conflicts:01_strided — a plain 32x32 shared tile: the column read is a 32-way bank conflict.
//
// What: each block loads its 32x32 tile into registers, then `passes` times stores it into a
// float[32][32] shared array by rows and reads it back by columns (a tile transpose), then writes it out.
// This is the textbook shared-memory transpose tile, written the obvious way.
// Why it is slow: shared memory has 32 banks of 4 bytes; word w lives in bank w % 32. A row store puts a
// warp's 32 words in 32 different banks (one wavefront). A column read asks for words tx * 32 + y: all 32
// in bank y, so the hardware serializes them into 32 wavefronts (ncu: l1tex__data_bank_conflicts_pipe_
// lsu_mem_shared_op_ld). A pass then costs 1 + 32 wavefronts where 2 would do.
// Napkin math: 34.4 GB of shared traffic at the defaults; at 33 wavefronts per 2 useful ones, expect about
// 2/33 of the shared-memory ceiling (~6%), i.e. ~16x slower than a conflict-free tile.
// Run: aisp bench run --targets ch07:bank_conflicts:01_strided
#include "chapters/ch07_memory_access/bank_conflicts/problem.hpp"

namespace aisp::ch07::bank_conflicts::v01 {

constexpr int k_per_thread = k_tile / k_rows;

__global__ void __launch_bounds__(k_tile * k_rows)
    tile_passes_strided_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t n,
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
  tile_passes_strided_kernel<<<tile_grid(a), dim3(k_tile, k_rows), 0, stream>>>(a.in, a.out, a.n, a.passes);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(BankConflictsProblem, launch, .step = 1, .slug = "strided", .kind = VariantKind::baseline,
                      .summary = "32x32 shared tile, column reads hit one bank 32 times (32-way conflict)");

}  // namespace aisp::ch07::bank_conflicts::v01
