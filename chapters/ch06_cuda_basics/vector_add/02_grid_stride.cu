// ch06:vector_add:02_grid_stride — one full wave of blocks, each thread loops over the array.
//
// What changed: the grid. Instead of one thread per element, the grid is exactly one wave (every SM
// filled to its thread limit, sm_count * max_threads_per_sm / 256 blocks, read from the device) and
// thread t handles t, t + stride, t + 2*stride, ... with stride = the whole grid. Accesses stay
// coalesced: at each step a warp still touches 32 consecutive floats.
// Why it should help: the million-block grid of step 01 becomes ~1000 blocks that never retire and
// relaunch, and the index prologue runs once per thread instead of once per element. It also makes the
// kernel correct for any n with any grid, which the next steps rely on.
// Napkin math: the same 3.22 GB; the bytes in flight per thread are unchanged (8 bytes of loads per
// iteration), so expect a small gain at most: block scheduling was cheap compared with DRAM time.
// Run: aisp bench run --targets ch06:vector_add:02_grid_stride
#include "chapters/ch06_cuda_basics/vector_add/problem.hpp"

namespace aisp::ch06::vector_add::v02 {

__global__ void add_grid_stride_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ c, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    c[i] = a[i] + b[i];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  add_grid_stride_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.a, a.b, a.c, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(VectorAddProblem, launch, .step = 2, .slug = "grid_stride", .kind = VariantKind::step,
                      .summary = "one full wave of blocks, grid-stride loop over the elements");

}  // namespace aisp::ch06::vector_add::v02
