// ch07:transpose:05_tile_order — launch the tiles in square groups, so that the blocks in flight read and
// write long runs of both matrices.
//
// What changed: only which tile a block takes. Step 04's 2D grid runs tiles in row-major order: the ~4,000
// blocks resident at once (132 SMs x 32 blocks) cover ~8 tile rows of the input, so the reads stream along
// 264 whole input rows while the writes land in every one of the 16,384 output rows, 1 KiB apiece. Here
// the grid is 1D and consecutive blocks walk down a column of a band of G tile rows before moving right,
// G chosen from the device so that the blocks in flight cover a square of about G x G tiles: both the
// reads and the writes then touch ~2,000 rows, ~8 KiB apiece.
// Why it should help: DRAM serves long runs within a row buffer (page) more cheaply than short scattered
// ones; a copy streams both sides, and this order gives a transpose's write side runs closer to a copy's.
// Napkin math: the same 2.15 GB; if step 04 falls short of the copy ladder's vectorized step because of
// the write side's access order, this step closes the gap; if not, the gap lies elsewhere.
// Run: aisp bench run --targets ch07:transpose:05_tile_order
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch07::transpose::v05 {

constexpr int k_tile = 32;
constexpr int k_threads = 64;                  // 8 lanes x 16 bytes cover a 32-float tile row
constexpr int k_row_step = k_threads / 8;      // tile rows between one thread's rows
constexpr int k_rows_per_thread = k_tile / k_row_step;

__global__ void __launch_bounds__(k_threads) transpose_tile_order_kernel(const float* __restrict__ in,
                                                                         float* __restrict__ out,
                                                                         std::size_t rows, std::size_t cols,
                                                                         unsigned group) {
  __shared__ float tile[k_tile][k_tile + 1];
  // Block b -> tile (tile_row, tile_col): bands of `group` tile rows, each walked column by column.
  const unsigned tiles_x = static_cast<unsigned>((cols + k_tile - 1) / k_tile);
  const unsigned tiles_y = static_cast<unsigned>((rows + k_tile - 1) / k_tile);
  const unsigned band = blockIdx.x / (group * tiles_x);
  const unsigned band_height = min(group, tiles_y - band * group);  // the last band may be shorter
  const unsigned in_band = blockIdx.x - band * group * tiles_x;
  const std::size_t row0 = static_cast<std::size_t>(band * group + in_band % band_height) * k_tile;
  const std::size_t col0 = static_cast<std::size_t>(in_band / band_height) * k_tile;
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

// The band height: the side of the square of tiles that the blocks resident at once can cover (a full
// SM holds max_threads_per_sm / k_threads of them), from the device.
unsigned group_height(const Args& a) {
  const double resident = static_cast<double>(a.sm_count) * (a.max_threads_per_sm / k_threads);
  unsigned g = 1;
  while (static_cast<double>(g) * g * 4 <= resident) g *= 2;  // the largest power of two <= sqrt(resident)
  return g;
}

void launch(const Args& a, cudaStream_t stream) {
  const std::size_t tiles = ((a.cols + k_tile - 1) / k_tile) * ((a.rows + k_tile - 1) / k_tile);
  transpose_tile_order_kernel<<<static_cast<unsigned>(tiles), k_threads, 0, stream>>>(a.in, a.out, a.rows, a.cols,
                                                                                       group_height(a));
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(transpose_tile_order_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(TransposeProblem, launch, facts, .step = 5, .slug = "tile_order",
                                 .kind = VariantKind::optimized,
                                 .summary = "step 04 with tiles launched in square groups: long DRAM runs on both sides");

}  // namespace aisp::ch07::transpose::v05
