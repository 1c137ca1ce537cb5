// ch07:transpose:03_padded_tile — pad the tile by one column: no shared-memory bank conflicts.
//
// What changed: the tile is declared [32][33] instead of [32][32]. Nothing else.
// Why it helps: shared memory has 32 banks of 4-byte words; word w sits in bank w % 32. In step 02 a warp
// reading a tile column touched words tx * 32 + ty: all in bank ty, a 32-way conflict served one word at
// a time. With rows 33 words long the same column is at tx * 33 + ty, in bank (tx + ty) % 32: 32 different
// banks, one pass (CUDA C++ Programming Guide, "Shared Memory"). The row-wise writes into the tile stay
// conflict-free (consecutive words). The extra column costs 128 bytes of shared memory per block.
// Napkin math: the same 2.15 GB; with the shared-memory reads no longer serialized, what is left between
// this step and the copy ceiling is how many bytes each thread keeps in flight (one 4-byte load, then a
// barrier before any store) — step 04's subject.
// Run: aisp bench run --targets ch07:transpose:03_padded_tile
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::transpose::v03 {

constexpr int k_tile = 32;  // the block is k_tile x k_tile threads, one element each

__global__ void transpose_padded_tile_kernel(const float* __restrict__ in, float* __restrict__ out,
                                             std::size_t rows, std::size_t cols) {
  __shared__ float tile[k_tile][k_tile + 1];  // + 1: a column of the tile spans all 32 banks
  const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * k_tile;  // the tile's first input row
  const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * k_tile;  // and first input column

  // Read: thread (tx, ty) takes input element (row0 + ty, col0 + tx); a warp reads one tile row.
  if (row0 + threadIdx.y < rows && col0 + threadIdx.x < cols) {
    tile[threadIdx.y][threadIdx.x] = in[(row0 + threadIdx.y) * cols + col0 + threadIdx.x];
  }
  __syncthreads();
  // Write: thread (tx, ty) writes output element (col0 + ty, row0 + tx) = input (row0 + tx, col0 + ty);
  // a warp writes one output row segment, reading a column of the tile.
  if (col0 + threadIdx.y < cols && row0 + threadIdx.x < rows) {
    out[(col0 + threadIdx.y) * rows + row0 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 block(k_tile, k_tile);
  const dim3 grid(static_cast<unsigned>((a.cols + k_tile - 1) / k_tile),
                  static_cast<unsigned>((a.rows + k_tile - 1) / k_tile));
  transpose_padded_tile_kernel<<<grid, block, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(TransposeProblem, launch, .step = 3, .slug = "padded_tile", .kind = VariantKind::step,
                      .summary = "tile padded to 32x33: a tile column spans all 32 banks, no conflicts");

}  // namespace aisp::ch07::transpose::v03
