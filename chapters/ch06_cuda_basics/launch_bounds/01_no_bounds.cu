// ch06:launch_bounds:01_no_bounds — the kernel as written, the compiler free to use registers (baseline).
//
// What: each thread loads the 8x8 matrix into registers once, then walks pixels with a grid-stride loop:
// two float4 loads, 64 FMAs, two float4 stores per pixel. Blocks of 256 threads; the grid is one full
// wave as the occupancy API counts it for this kernel.
// Why it is the baseline: nothing is slow on purpose; this is the natural way to write it. ptxas gives it
// what it asks for, ~96 registers per thread (64 for the matrix), and registers are what limit it:
// 96 x 32 = 3072 registers per warp, 16384 per scheduler hold 5 warps, 20 per SM: two 8-warp blocks, 25%
// occupancy (`aisp tools occupancy --threads 256 --regs 96`).
// Napkin math: 64 bytes per pixel, 2.15 GB per launch, ~0.5 ms at ~4.3 TB/s. Bytes in flight: 512
// threads x 32 B of loads = 16 KB per SM, about what DRAM latency x bandwidth asks of each SM, so 25%
// may already be close to the DRAM bound. Whether more warps help is the question of this ladder. With
// gather=1 it is not: the pixel load waits for the index load, so a thread has 32 bytes in flight at most
// half of the time, random sectors at that: latency-bound at 25% occupancy.
// Run: aisp bench run --targets ch06:launch_bounds:01_no_bounds
#include "chapters/ch06_cuda_basics/launch_bounds/problem.hpp"

namespace aisp::ch06::launch_bounds::v01 {

// k_gather: the source pixel comes from idx (axis gather=1), else it is p itself.
template <bool k_gather>
__global__ void mix_kernel(const float* __restrict__ x, const float* __restrict__ m,
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

AISP_REGISTER_VARIANT_WITH_FACTS(LaunchBoundsProblem, launch, facts, .step = 1, .slug = "no_bounds",
                                 .kind = VariantKind::baseline,
                                 .summary = "the compiler picks the registers (~96): 25% occupancy at 256 threads");

}  // namespace aisp::ch06::launch_bounds::v01
