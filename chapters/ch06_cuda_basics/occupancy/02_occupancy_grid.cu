// ch06:occupancy:02_occupancy_grid — one full wave sized by the occupancy API, grid-stride loop.
//
// What changed: the grid. cudaOccupancyMaxActiveBlocksPerMultiprocessor says how many blocks of this
// kernel fit on an SM at this block size (warp slots, block slots, registers, shared memory: the
// formula of docs/occupancy.md); the grid is that times the SM count, and each thread loops over the
// array with a stride of the whole grid. Any block size then gets exactly one resident wave.
// Why it should help: no block retires and relaunches, no partial last wave, and a grid that is right
// for any block size and any GPU without a hard-coded number. The loads per thread in flight are
// unchanged (one 4-byte load per iteration), so expect a small gain, largest where step 01's tail
// wave was worst.
// Napkin math: the same 2.15 GB; within a few percent of step 01 at most block sizes.
// Run: aisp bench run --targets ch06:occupancy:02_occupancy_grid --axis block=256
#include "chapters/ch06_cuda_basics/occupancy/problem.hpp"

namespace aisp::ch06::occupancy::v02 {

__global__ void affine_grid_stride_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = fmaf(k_alpha, x[i], k_beta);
  }
}

const void* kernel() { return reinterpret_cast<const void*>(&affine_grid_stride_kernel); }

void launch(const Args& a, cudaStream_t stream) {
  affine_grid_stride_kernel<<<occupancy_grid(a, kernel()), a.block, 0, stream>>>(a.x, a.y, a.n);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) { return occupancy_facts(a, kernel()); }

AISP_REGISTER_VARIANT_WITH_FACTS(OccupancyProblem, launch, facts, .step = 2, .slug = "occupancy_grid",
                                 .kind = VariantKind::step,
                                 .summary = "grid = SMs x blocks/SM from the occupancy API; grid-stride loop");

}  // namespace aisp::ch06::occupancy::v02
