// ch09:intensity:01_fma_chain — one streaming kernel with a tunable number of FMAs per element.
//
// What it is: each thread streams pairs of float4s (8 elements) with a grid-stride loop, runs the chain of
// F = fma_per_elem FMAs on all 8 at once (8 independent chains: enough instruction-level parallelism to
// keep the FMA pipes full at F >= ~64), and writes them back. The chain loop is unrolled by 16; alpha and
// beta arrive at run time, so nothing folds.
// Why a sweep: at small F the 8 bytes per element dominate and the time is the DRAM time of 2 n 4 bytes; at
// large F the 2 F FLOPs per element dominate and the time is FLOPs / FP32 peak. The measured turn between
// them is the ridge point of this GPU's roofline, to compare with peak / bandwidth from `aisp hw peaks`.
// Napkin math (H200, n = 2^28): memory time 2.15 GB / ~4.4 TB/s = ~0.49 ms for every F up to the ridge;
// compute time 2 F n / ~61 TFLOP/s = 8.8 us * F, so the two meet near F ~ 55 (14 FLOP/byte).
// Run: aisp bench run --targets ch09:intensity:01_fma_chain
#include "chapters/ch09_intensity_fusion/intensity/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::intensity::v01 {

constexpr int THREADS = 256;

__device__ __forceinline__ void fma_chain4(float4& v, float alpha, float beta) {
  v.x = fmaf(v.x, alpha, beta);
  v.y = fmaf(v.y, alpha, beta);
  v.z = fmaf(v.z, alpha, beta);
  v.w = fmaf(v.w, alpha, beta);
}

__global__ void __launch_bounds__(THREADS)
    fma_chain_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, int fma_per_elem,
                     float alpha, float beta) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * THREADS;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * THREADS + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* y4 = reinterpret_cast<float4*>(y);
  // Two float4s per thread per trip, a grid apart (both loads coalesced), processed together.
  for (std::size_t i = first; i < n4; i += 2 * stride) {
    const bool second = i + stride < n4;
    float4 v0 = x4[i];
    float4 v1 = second ? x4[i + stride] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 16
    for (int j = 0; j < fma_per_elem; ++j) {
      fma_chain4(v0, alpha, beta);
      fma_chain4(v1, alpha, beta);
    }
    y4[i] = v0;
    if (second) y4[i + stride] = v1;
  }
  // The n % 4 tail, one element per thread.
  for (std::size_t i = 4 * n4 + first; i < n; i += stride) {
    float v = x[i];
    for (int j = 0; j < fma_per_elem; ++j) v = fmaf(v, alpha, beta);
    y[i] = v;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const int blocks = a.sm_count * (a.max_threads_per_sm / THREADS);  // one full wave
  fma_chain_kernel<<<blocks, THREADS, 0, stream>>>(a.x, a.y, a.n, a.fma_per_elem, a.alpha, a.beta);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(&fma_chain_kernel), THREADS));
}

AISP_REGISTER_VARIANT_WITH_FACTS(IntensityProblem, launch, facts, .step = 1, .slug = "fma_chain",
                                 .kind = VariantKind::baseline,
                                 .summary = "stream x -> y with F chained FMAs per element (8 chains per thread)");

}  // namespace aisp::ch09::intensity::v01
