// ch06:ilp:03_four_chains — 4 independent FMA chains per thread, interleaved.
//
// What changed: four chains per thread instead of two.
// Why it helps: four independent FFMAs per ~4 cycles of latency is one per cycle: enough, in principle,
// for one warp to keep its scheduler's FP32 pipe busy with no help from other warps.
// Napkin math: 17.2 GFLOP; expect near the FP32 peak, less the loop overhead and the load/store
// phases between groups of chains (a few percent).
// Run: aisp bench run --targets ch06:ilp:03_four_chains
#include "chapters/ch06_cuda_basics/ilp/problem.hpp"

namespace aisp::ch06::ilp::v03 {

constexpr int k_chains = 4;

__global__ void chains_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, int iters) {
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  // Thread t owns elements t, t + T, t + 2T, ... as in step 01, and takes them k_chains at a time.
  for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; base < n;
       base += k_chains * threads) {
    // v[] lives in registers: it is indexed only with compile-time constants (fully unrolled loops).
    // A chain past the end of the array runs on 0 and is never stored: the last group of a thread may
    // be partial, and masking it costs less than a branchy remainder loop.
    float v[k_chains];
#pragma unroll
    for (int c = 0; c < k_chains; ++c) {
      const std::size_t i = base + c * threads;
      v[c] = i < n ? x[i] : 0.0f;
    }
#pragma unroll 16
    for (int k = 0; k < iters; ++k) {
#pragma unroll
      for (int c = 0; c < k_chains; ++c) v[c] = fmaf(v[c], k_a, k_b);
    }
#pragma unroll
    for (int c = 0; c < k_chains; ++c) {
      const std::size_t i = base + c * threads;
      if (i < n) y[i] = v[c];
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  chains_kernel<<<a.sm_count, block_threads(a), 0, stream>>>(a.x, a.y, a.n, a.iters);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(IlpProblem, launch, .step = 3, .slug = "four_chains", .kind = VariantKind::step,
                      .summary = "four independent FMA chains per thread: one FFMA per cycle covers the latency");

}  // namespace aisp::ch06::ilp::v03
