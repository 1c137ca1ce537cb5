// ch07:reduction:04_vectorized — one full wave of blocks; each thread sums ~1,000 elements with 16-byte
// loads, four in flight, before the block reduces once.
//
// What changed: the work per thread. The grid is one full wave (sm_count x threads-per-SM / 256 blocks,
// from the device) instead of one thread per element; each thread walks the array in a grid-stride loop
// of float4 loads, issuing four independent loads before it adds any of them, and keeps a running sum in
// a register. Only then does the block reduce as in step 03 (shuffles, one barrier, one atomicAdd). The
// n % 4 tail is summed one float at a time by the same loop's scalar epilogue.
// Why it helps: (1) atomics on the result fall from 2^20 to one per block (~1,000 on an H200), so the
// serialized address no longer matters; (2) by Little's law (bytes in flight = bandwidth x latency) a
// thread with four 16-byte loads outstanding keeps 16x the bytes in flight of one 4-byte load, which a
// full wave needs to cover DRAM latency (~4.3 TB/s x ~700 ns ~ 3 MB across the GPU); (3) the block's
// reduction and its barrier are paid once per ~250K elements instead of once per 256.
// Napkin math: 1.07 GB at the DRAM read ceiling, ~0.25 ms on an H200; the memset of the result and the
// final atomics add a few microseconds. This step should sit within a few percent of the read ceiling.
// Run: aisp bench run --targets ch07:reduction:04_vectorized
#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch07::reduction::v04 {

constexpr int k_threads = 256;
constexpr int k_warps = k_threads / 32;
constexpr int k_unroll = 4;  // independent float4 loads in flight per thread

// After it, lane 0 holds the sum of the warp's 32 values (the other lanes hold partial sums).
__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void __launch_bounds__(k_threads) sum_vectorized_kernel(const float* __restrict__ x,
                                                                   float* __restrict__ out, std::size_t n) {
  __shared__ float warp_sums[k_warps];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * k_threads;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc memory is 256-byte aligned

  float s = 0.0f;
  std::size_t i = first;
  // Main loop: k_unroll loads issued before the first add; the array stays in registers because it is
  // indexed only with compile-time constants.
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 v[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) v[k] = x4[i + k * stride];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  for (; i < n4; i += stride) {
    const float4 v = x4[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) s += x[j];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  s = warp_sum(s);
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (warp == 0) {
    const float block = warp_sum(lane < k_warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) atomicAdd(out, block);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  sum_vectorized_kernel<<<full_wave_blocks(a, k_threads), k_threads, 0, stream>>>(a.x, a.out, a.n);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(sum_vectorized_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(ReductionProblem, launch, facts, .step = 4, .slug = "vectorized",
                                 .kind = VariantKind::optimized,
                                 .summary = "full wave, float4 grid-stride with 4 loads in flight, one atomic per block");

}  // namespace aisp::ch07::reduction::v04
