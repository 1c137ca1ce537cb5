// ch06:launch_bounds:02_min_blocks_8 — __launch_bounds__(256, 8): full occupancy, 32 registers.
//
// What changed: the kernel's declaration tells the compiler it is launched with at most 256 threads per
// block and that we want at least 8 blocks resident per SM (CUDA C++ Programming Guide, "Launch
// Bounds"): the most an SM can hold. ptxas must then fit a thread in 65536 / (8 x 256) = 32 registers,
// fewer than the matrix alone needs; the code is unchanged. It reports only a few spilled bytes because it does not
// keep the matrix at all: it re-loads the entries from global memory (they hit in L1) for every pixel.
// Why it might help, and why it probably does not: occupancy is 100% (64 warps per SM, four times the
// baseline's loads in flight), but each pixel now costs ~64 extra load instructions, and the SM's load
// unit issues about one warp-wide load per cycle: at the DRAM rate an SM must finish ~0.26 pixels per
// cycle, i.e. ~17 load instructions per cycle. The facts (regs 32, spills ~0, occupancy 100%) look
// ideal; the time is the lesson: registers are not spills alone, and occupancy is a means, not a goal.
// Napkin math: if load-issue bound, ~64 cycles per pixel-warp per SM: several times slower than step 01.
// With gather=1 (a latency-bound remap) the four-times-larger set of warps is what the kernel lacks; whether
// it outweighs the 64 re-loads per pixel is what the gather=1 table says.
// Run: aisp bench run --targets ch06:launch_bounds:02_min_blocks_8
#include "chapters/ch06_cuda_basics/launch_bounds/problem.hpp"

namespace aisp::ch06::launch_bounds::v02 {

// k_gather: the source pixel comes from idx (axis gather=1), else it is p itself.
template <bool k_gather>
__global__ void __launch_bounds__(256, 8) mix_kernel(const float* __restrict__ x, const float* __restrict__ m,
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

AISP_REGISTER_VARIANT_WITH_FACTS(LaunchBoundsProblem, launch, facts, .step = 2, .slug = "min_blocks_8",
                                 .kind = VariantKind::step,
                                 .summary = "__launch_bounds__(256, 8): 32 registers, 100% occupancy, matrix re-loaded per pixel");

}  // namespace aisp::ch06::launch_bounds::v02
