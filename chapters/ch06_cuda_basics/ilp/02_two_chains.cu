// ch06:ilp:02_two_chains — 2 independent FMA chains per thread, interleaved.
//
// What changed: each thread loads two of its elements and advances both chains in the same loop: one
// FMA of chain 0, then one of chain 1, and so on. Same threads, same FMAs, same order within each chain.
// Why it helps: the two FMAs of a step do not depend on each other, so the scheduler issues the second
// while the first is in flight: two FFMAs per ~4-cycle latency instead of one.
// Napkin math: 17.2 GFLOP as before; expect about twice step 01's rate, ~50% of the FP32 peak.
// Run: aisp bench run --targets ch06:ilp:02_two_chains
#include "chapters/ch06_cuda_basics/ilp/problem.hpp"

namespace aisp::ch06::ilp::v02 {

constexpr int k_chains = 2;

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

AISP_REGISTER_VARIANT(IlpProblem, launch, .step = 2, .slug = "two_chains", .kind = VariantKind::step,
                      .summary = "two independent FMA chains per thread, interleaved: two FFMAs per latency");

}  // namespace aisp::ch06::ilp::v02
