// ch07:transpose:05_diagonal — launch the tiles along diagonals, so that blocks running together spread
// their column-side accesses over the DRAM channels.
//
// What changed: only which tile a block takes (the "diagonal block reordering" of Ruetsch & Micikevicius,
// "Optimizing Matrix Transpose in CUDA", NVIDIA, 2009). In step 04 consecutive blocks take neighbouring
// tiles of one tile row: they read the same input rows and write the same output rows' neighbouring
// 128-byte pieces, and those output rows lie a power-of-two stride apart (64 KiB at the default size).
// Addresses a power-of-two stride apart tend to map to the same DRAM channels and banks ("partition
// camping"); here block b takes tile row b % tile_rows and tile column (b / tile_rows + tile row) %
// tile_cols, so consecutive blocks walk a diagonal: different input rows, different output rows.
// Why it might help: if the column side of step 04 queues on a few channels while others idle, spreading
// it brings the transpose closer to a copy, whose consecutive addresses cover every channel evenly.
// Napkin math: the same 2.15 GB; the bound is still the DRAM copy ceiling. Hopper hashes addresses over
// its channels, which may already defeat the camping this order was invented for; the measurement says.
// Run: aisp bench run --targets ch07:transpose:05_diagonal
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch07::transpose::v05 {

constexpr int k_tile = 32;
constexpr int k_threads = 64;                  // 8 lanes x 16 bytes cover a 32-float tile row
constexpr int k_row_step = k_threads / 8;      // tile rows between one thread's rows
constexpr int k_rows_per_thread = k_tile / k_row_step;

__global__ void __launch_bounds__(k_threads) transpose_diagonal_kernel(const float* __restrict__ in,
                                                                         float* __restrict__ out,
                                                                         std::size_t rows, std::size_t cols) {
  __shared__ float tile[k_tile][k_tile + 1];
  // Launch order b -> tile (tile_row, tile_col) along diagonals; every tile is still taken exactly once
  // (for each tile row, b / tile_rows runs over all tile columns).
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  const unsigned tile_row = b % gridDim.y;
  const unsigned tile_col = (b / gridDim.y + tile_row) % gridDim.x;
  const std::size_t row0 = static_cast<std::size_t>(tile_row) * k_tile;
  const std::size_t col0 = static_cast<std::size_t>(tile_col) * k_tile;
  const int c = 4 * (threadIdx.x % 8);  // first of this thread's four tile columns
  const int r = threadIdx.x / 8;        // first of its tile rows: r, r + 8, r + 16, r + 24
  // Whole tiles of a matrix whose rows start 16-byte aligned take the float4 path; edge tiles and odd
  // shapes take the scalar one. The test is the same for every thread of the block (no divergence).
  const bool whole = row0 + k_tile <= rows && col0 + k_tile <= cols && rows % 4 == 0 && cols % 4 == 0;

  if (whole) {
    float4 v[k_rows_per_thread];
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      v[k] = *reinterpret_cast<const float4*>(in + (row0 + r + k * k_row_step) * cols + col0 + c);
    }
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      float* dst = &tile[r + k * k_row_step][c];
      dst[0] = v[k].x;
      dst[1] = v[k].y;
      dst[2] = v[k].z;
      dst[3] = v[k].w;
    }
  } else {
    for (int k = 0; k < k_rows_per_thread; ++k) {
      for (int e = 0; e < 4; ++e) {
        const std::size_t row = row0 + r + k * k_row_step, col = col0 + c + e;
        if (row < rows && col < cols) tile[r + k * k_row_step][c + e] = in[row * cols + col];
      }
    }
  }
  __syncthreads();

  // Output row col0 + j holds input column col0 + j; this thread writes its entries row0 + c .. + 3,
  // which are tile column j, rows c .. c + 3.
  if (whole) {
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      const int j = r + k * k_row_step;
      const float4 w = make_float4(tile[c][j], tile[c + 1][j], tile[c + 2][j], tile[c + 3][j]);
      *reinterpret_cast<float4*>(out + (col0 + j) * rows + row0 + c) = w;
    }
  } else {
    for (int k = 0; k < k_rows_per_thread; ++k) {
      for (int e = 0; e < 4; ++e) {
        const int j = r + k * k_row_step;
        if (col0 + j < cols && row0 + c + e < rows) out[(col0 + j) * rows + row0 + c + e] = tile[c + e][j];
      }
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.cols + k_tile - 1) / k_tile),
                  static_cast<unsigned>((a.rows + k_tile - 1) / k_tile));
  transpose_diagonal_kernel<<<grid, k_threads, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(transpose_diagonal_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(TransposeProblem, launch, facts, .step = 5, .slug = "diagonal",
                                 .kind = VariantKind::optimized,
                                 .summary = "step 04 with tiles launched along diagonals (against partition camping)");

}  // namespace aisp::ch07::transpose::v05
