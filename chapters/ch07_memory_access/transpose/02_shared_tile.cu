// ch07:transpose:02_shared_tile — stage a 32 x 32 tile in shared memory so the writes are coalesced too.
//
// What changed: the block first copies its 32 x 32 tile of the input into shared memory (row by row:
// coalesced reads, as before), synchronizes, then writes the tile out row by row of the *output*, reading
// shared memory along its columns. Both global accesses of a warp are now 128 contiguous bytes; the
// transpose itself happens inside the SM, where scattered access is cheap.
// Why it helps: each output sector is written whole by one warp instruction instead of in eight 4-byte
// pieces, so the L2 sees an eighth of the write transactions of step 01.
// What it leaves: reading tile[tx][ty] for a warp (ty fixed, tx = 0..31) touches 32 words that are 32
// words apart, which all sit in the same shared-memory bank: a 32-way bank conflict, replayed 32 times
// (CUDA C++ Programming Guide, "Shared Memory": banks). Step 03 removes it.
// Napkin math: the same 2.15 GB; the write side now costs what the read side costs, so the kernel should
// approach the copy ceiling as far as the serialized shared-memory reads allow.
// Run: aisp bench run --targets ch07:transpose:02_shared_tile
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::transpose::v02 {

constexpr int k_tile = 32;  // the block is k_tile x k_tile threads, one element each

__global__ void transpose_shared_tile_kernel(const float* __restrict__ in, float* __restrict__ out,
                                             std::size_t rows, std::size_t cols) {
  __shared__ float tile[k_tile][k_tile];
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
  transpose_shared_tile_kernel<<<grid, block, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(TransposeProblem, launch, .step = 2, .slug = "shared_tile", .kind = VariantKind::step,
                      .summary = "32x32 tile staged in shared memory: reads and writes both coalesced");

}  // namespace aisp::ch07::transpose::v02
