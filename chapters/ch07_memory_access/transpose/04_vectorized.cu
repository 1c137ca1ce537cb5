// ch07:transpose:04_vectorized — each thread moves 16 elements as four 16-byte loads and four 16-byte stores.
//
// What changed: the same padded 32 x 32 tile, but 64 threads per block instead of 1024. Thread t owns the
// four columns 4 * (t % 8) .. + 3 of the tile rows t / 8, + 8, + 16, + 24: it issues all four float4 loads
// before it touches shared memory, then after the barrier gathers four float4s from tile columns and
// stores them. A warp still reads and writes whole 128-byte row segments (8 lanes x 16 bytes per row).
// Why it helps: step 03 keeps one 4-byte load in flight per thread and then waits at the barrier; by
// Little's law (bytes in flight = bandwidth x latency) a full GPU of such threads holds
// 132 SMs x 2048 x 4 B ≈ 1.1 MB in flight, short of what HBM needs to stay busy at ~600-800 ns latency
// (~3 MB). Four independent 16-byte loads per thread are 16x the bytes per thread, a quarter of the
// instructions per byte, and a sixteenth of the barriers per byte.
// Bank conflicts stay away with the 33-word rows: a warp's lanes cover 4 tile rows x 8 column groups, and
// word (row * 33 + col) lands in bank (row + col) % 32, which differs across the 32 lanes both when the
// tile is filled (row r + lane / 8, cols 4 * (lane % 8) + e) and when it is read by columns.
// Napkin math: the same 2.15 GB; expect this step near the copy ladder's vectorized step (~93% of the
// DRAM copy ceiling on an H200).
// Run: aisp bench run --targets ch07:transpose:04_vectorized
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch07::transpose::v04 {

constexpr int k_tile = 32;
constexpr int k_threads = 64;                  // 8 lanes x 16 bytes cover a 32-float tile row
constexpr int k_row_step = k_threads / 8;      // tile rows between one thread's rows
constexpr int k_rows_per_thread = k_tile / k_row_step;

__global__ void __launch_bounds__(k_threads) transpose_vectorized_kernel(const float* __restrict__ in,
                                                                         float* __restrict__ out,
                                                                         std::size_t rows, std::size_t cols) {
  __shared__ float tile[k_tile][k_tile + 1];
  const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * k_tile;
  const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * k_tile;
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
  transpose_vectorized_kernel<<<grid, k_threads, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(transpose_vectorized_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(TransposeProblem, launch, facts, .step = 4, .slug = "vectorized",
                                 .kind = VariantKind::step,
                                 .summary = "64 threads per 32x32 tile, each moving 4 float4 in and 4 float4 out");

}  // namespace aisp::ch07::transpose::v04
