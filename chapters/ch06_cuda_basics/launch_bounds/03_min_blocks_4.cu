// ch06:launch_bounds:03_min_blocks_4 — __launch_bounds__(256, 4): room for four blocks per SM.
//
// What changed: the cap of step 02, relaxed: at least 4 blocks per SM instead of 8, so ptxas may use
// 65536 / (4 x 256) = 64 registers per thread: room for the matrix, not for everything else.
// Why it should help: 64 registers per thread double the resident warps: 32 per SM, 50% occupancy, so
// twice the loads in flight per SM to cover DRAM latency. What it costs: the 96 values that wanted
// registers must fit in 64, so ptxas spills some (local memory, the `local_bytes` fact) or re-loads
// matrix entries inside the pixel loop; if those extra loads cost more than the extra warps win, the
// cap is a loss.
// Where it should win: with gather=1 each pixel waits for two dependent DRAM round trips (index, then a
// random 32-byte pixel), so at 25% occupancy the baseline holds about half the bytes in flight that DRAM
// needs; twice the warps double them, and the re-loaded matrix entries hit in L1/L2 under that latency.
// Napkin math: the same 2.15 GB; at best the DRAM bound (~0.5 ms on an H200), if 25% was short of it.
// With gather=1, up to 2x over step 01 if the baseline is latency-bound (to be measured).
// Run: aisp bench run --targets ch06:launch_bounds:03_min_blocks_4
#include "chapters/ch06_cuda_basics/launch_bounds/problem.hpp"

namespace aisp::ch06::launch_bounds::v03 {

// k_gather: the source pixel comes from idx (axis gather=1), else it is p itself.
template <bool k_gather>
__global__ void __launch_bounds__(256, 4) mix_kernel(const float* __restrict__ x, const float* __restrict__ m,
                           const std::uint32_t* __restrict__ idx, float* __restrict__ y,
                           std::size_t pixels) {
  // The matrix, loaded once per thread and kept for its whole life: 64 values indexed only with
  // compile-time constants (fully unrolled loops), so they can live in registers.
  float w[k_channels * k_channels];
#pragma unroll
  for (int k = 0; k < k_channels * k_channels; ++k) w[k] = m[k];
  // A pixel's 8 channels are 32 contiguous bytes: two float4 loads (cudaMalloc alignment is 256 bytes).
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* y4 = reinterpret_cast<float4*>(y);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels; p += stride) {
    const std::size_t src = k_gather ? idx[p] : p;
    const float4 lo = x4[2 * src];
    const float4 hi = x4[2 * src + 1];
    const float in[k_channels] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    float out[k_channels];
#pragma unroll
    for (int r = 0; r < k_channels; ++r) {
      float acc = 0.0f;
#pragma unroll
      for (int c = 0; c < k_channels; ++c) acc = fmaf(w[r * k_channels + c], in[c], acc);
      out[r] = acc;
    }
    y4[2 * p] = make_float4(out[0], out[1], out[2], out[3]);
    y4[2 * p + 1] = make_float4(out[4], out[5], out[6], out[7]);
  }
}

template <bool k_gather>
void launch_as(const Args& a, cudaStream_t stream) {
  const int blocks = full_wave_blocks(a, reinterpret_cast<const void*>(&mix_kernel<k_gather>));
  mix_kernel<k_gather><<<blocks, k_block, 0, stream>>>(a.x, a.m, a.idx, a.y, a.pixels);
  AISP_CHECK_LAUNCH();
}

void launch(const Args& a, cudaStream_t stream) {
  if (a.idx != nullptr) {
    launch_as<true>(a, stream);
  } else {
    launch_as<false>(a, stream);
  }
}

// Registers, spill bytes and the runtime's predicted occupancy of the kernel this point runs.
std::vector<Fact> facts(const Args& a) {
  const void* kernel = a.idx != nullptr ? reinterpret_cast<const void*>(&mix_kernel<true>)
                                        : reinterpret_cast<const void*>(&mix_kernel<false>);
  return standard_facts(kernel_facts(kernel, k_block));
}

AISP_REGISTER_VARIANT_WITH_FACTS(LaunchBoundsProblem, launch, facts, .step = 3, .slug = "min_blocks_4",
                                 .kind = VariantKind::step,
                                 .summary = "__launch_bounds__(256, 4): at most 64 registers, 50% occupancy");

}  // namespace aisp::ch06::launch_bounds::v03
