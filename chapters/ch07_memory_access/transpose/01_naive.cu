// ch07:transpose:01_naive — one thread per element: coalesced reads, strided writes (the baseline).
//
// What: a 2D grid of 32 x 32-thread blocks covers the input; thread (x, y) reads in[y][x] and writes
// out[x][y]. This is the transpose everyone writes first, and it is half right: the 32 threads of a warp
// share y and take consecutive x, so the warp's read is 128 contiguous bytes.
// Why it is slow: the same warp's write goes to 32 different output rows, `rows * 4` bytes apart
// (64 KiB at the default size): 32 separate 32-byte sectors, 4 bytes used in each. The L2 merges the
// partial sectors before they reach DRAM (the other warps of the block fill in the rest), so DRAM traffic
// stays near the minimum, but the L2 and the load/store units handle eight times the transactions a
// coalesced write would need.
// Napkin math: 2.15 GB per launch at 16384^2; at the DRAM copy ceiling (~4.3 TB/s on an H200) that is
// ~0.5 ms. Expect several times that: the write side moves one 32-byte sector per 4-byte element through
// the L2 (8.6 GB of sector traffic), roughly the framework's strided copy (1.9 ms, 1,122 GB/s on an H200).
// Run: aisp bench run --targets ch07:transpose:01_naive
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::transpose::v01 {

constexpr int k_tile = 32;  // the block is k_tile x k_tile threads, one element each

__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t rows,
                                       std::size_t cols) {
  const std::size_t x = static_cast<std::size_t>(blockIdx.x) * k_tile + threadIdx.x;  // input column
  const std::size_t y = static_cast<std::size_t>(blockIdx.y) * k_tile + threadIdx.y;  // input row
  if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 block(k_tile, k_tile);
  const dim3 grid(static_cast<unsigned>((a.cols + k_tile - 1) / k_tile),
                  static_cast<unsigned>((a.rows + k_tile - 1) / k_tile));
  transpose_naive_kernel<<<grid, block, 0, stream>>>(a.in, a.out, a.rows, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(TransposeProblem, launch, .step = 1, .slug = "naive", .kind = VariantKind::baseline,
                      .summary = "one thread per element: coalesced reads, writes 32 rows apart per warp");

}  // namespace aisp::ch07::transpose::v01
