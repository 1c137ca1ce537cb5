// ch07:reduction:03_warp_shuffle — sum within each warp through registers (shuffles), not shared memory.
//
// What changed: the block's tree. Each warp first sums its 32 values with five __shfl_down_sync steps
// (each lane reads a register of the lane 16, 8, 4, 2, 1 places above it, no memory involved); lane 0
// of each of the 8 warps writes its sum to shared memory; after one barrier, warp 0 sums those 8 the same
// way and lane 0 does the block's one atomicAdd. Same grid, same one element per thread.
// Why it helps: 8 barriers per block become 1, and 8 rounds of shared-memory loads and stores become 5
// register shuffles; the threads of a warp run in lockstep under the _sync mask, so no barrier is needed
// inside a warp (CUDA C++ Programming Guide, "Warp Shuffle Functions").
// What it leaves: the 2^20 atomics on one address of step 02, and one 4-byte load in flight per thread.
// If those dominate, this step will measure close to step 02: the block's own arithmetic is not where
// the time goes, which is what the measurement will say.
// Napkin math: the same 1.07 GB and 2^20 atomics as step 02.
// Run: aisp bench run --targets ch07:reduction:03_warp_shuffle
#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::reduction::v03 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;

// After it, lane 0 holds the sum of the warp's 32 values (the other lanes hold partial sums).
__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void sum_warp_shuffle_kernel(const float* __restrict__ x, float* __restrict__ out, std::size_t n) {
  __shared__ float warp_sums[k_warps];
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float v = warp_sum(i < n ? x[i] : 0.0f);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const float block = warp_sum(lane < k_warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) atomicAdd(out, block);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
  sum_warp_shuffle_kernel<<<blocks, k_threads, 0, stream>>>(a.x, a.out, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(ReductionProblem, launch, .step = 3, .slug = "warp_shuffle", .kind = VariantKind::step,
                      .summary = "warp sums by __shfl_down_sync, one barrier, one atomicAdd per block");

}  // namespace aisp::ch07::reduction::v03
