// ch07:transpose:05_wide_tile — a 64 x 64 tile: every warp reads and writes 256-byte row segments.
//
// What changed: the tile is 64 x 64 (padded to 64 x 65) and the block 256 threads. Thread t still moves
// four float4 in and four out, now from the columns 4 * (t % 16) .. + 3 of the tile rows t / 16, + 16,
// + 32, + 48: 16 lanes x 16 bytes cover one 256-byte tile row, so a warp instruction reads (and, after the
// barrier, writes) two rows of 256 contiguous bytes instead of step 04's four rows of 128.
// Why it should help: ncu shows step 04 wasting no bytes; what differs from a copy is the DRAM pattern,
// each block touching 32 input rows and 32 output rows 128 bytes at a time, rows 64 KiB apart. Twice the
// run per row halves the row switches per byte on both sides at once.
// Bank conflicts: with 65-word rows, word (row * 65 + col) is in bank (row + col) % 32, and a tile row of
// 64 words wraps the banks twice, so lanes m and m + 8 of the same row (columns 4m and 4m + 32) would hit
// the same bank. The lanes of the upper half (m >= 8) therefore take their four elements in the order
// 2, 3, 0, 1 (element e ^ 2 at turn e): at each of the four turns the 32 lanes cover banks
// 4 * (m % 8) + {e, e ^ 2, e + 1, (e ^ 2) + 1}, all 32 different, on the fill and on the column reads
// alike (there the lane's two rows are the two output rows j, j + 1 and the same sum appears).
// Napkin math: the same 2.15 GB; 16.6 KB of shared memory and 256 threads per block keep 8 blocks and
// 64 B x 2048 threads ≈ 128 KB in flight per SM, as step 04. Goal: >= 90% of the DRAM copy ceiling on an
// H200 (<= ~556 us at 16384^2).
// Run: aisp bench run --targets ch07:transpose:05_wide_tile
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch07::transpose::v05 {

constexpr int k_tile = 64;
constexpr int k_threads = 256;                 // 16 lanes x 16 bytes cover a 64-float tile row
constexpr int k_row_step = k_threads / 16;     // tile rows between one thread's rows
constexpr int k_rows_per_thread = k_tile / k_row_step;

__global__ void __launch_bounds__(k_threads) transpose_wide_tile_kernel(const float* __restrict__ in,
                                                                        float* __restrict__ out,
                                                                        std::size_t rows, std::size_t cols) {
  __shared__ float tile[k_tile][k_tile + 1];
  const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * k_tile;
  const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * k_tile;
  const int m = threadIdx.x % 16;
  const int c = 4 * m;             // first of this thread's four tile columns
  const int r = threadIdx.x / 16;  // first of its tile rows: r, r + 16, r + 32, r + 48
  const int s = m >= 8 ? 2 : 0;    // upper-half lanes visit their four elements in the order e ^ 2
  const bool whole = row0 + k_tile <= rows && col0 + k_tile <= cols && rows % 4 == 0 && cols % 4 == 0;

  if (whole) {
    float4 v[k_rows_per_thread];
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      v[k] = *reinterpret_cast<const float4*>(in + (row0 + r + k * k_row_step) * cols + col0 + c);
    }
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      // p holds the elements in visiting order: p.x is element 0 ^ s, p.y element 1 ^ s, ...
      const float4 p = s ? make_float4(v[k].z, v[k].w, v[k].x, v[k].y) : v[k];
      float* dst = &tile[r + k * k_row_step][c];
      dst[0 ^ s] = p.x;
      dst[1 ^ s] = p.y;
      dst[2 ^ s] = p.z;
      dst[3 ^ s] = p.w;
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
  // which are tile column j, rows c .. c + 3, read in the same e ^ s order as the fill.
  if (whole) {
#pragma unroll
    for (int k = 0; k < k_rows_per_thread; ++k) {
      const int j = r + k * k_row_step;
      const float q0 = tile[c + (0 ^ s)][j], q1 = tile[c + (1 ^ s)][j];
      const float q2 = tile[c + (2 ^ s)][j], q3 = tile[c + (3 ^ s)][j];
      const float4 w = s ? make_float4(q2, q3, q0, q1) : make_float4(q0, q1, q2, q3);
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
  transpose_wide_tile_kernel<<<grid, k_threads, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(transpose_wide_tile_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(TransposeProblem, launch, facts, .step = 5, .slug = "wide_tile",
                                 .kind = VariantKind::optimized,
                                 .summary = "256 threads per 64x64 tile: 256-byte row segments on both sides");

}  // namespace aisp::ch07::transpose::v05
