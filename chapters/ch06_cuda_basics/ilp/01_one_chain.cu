// ch06:ilp:01_one_chain — one dependent FMA chain per thread at a time (the baseline).
//
// What: thread t owns elements t, t + T, t + 2T, ... (T = all threads) and runs their chains one after
// the other: load x, `iters` times v = fma(v, a, b), store. The loop over `iters` is unrolled 16 times,
// so loop overhead is a few instructions per 16 FMAs.
// Why it is slow at this occupancy: every FMA needs the previous one's result, which an FFMA delivers ~4
// cycles after issue. With one warp per scheduler (warps_per_sm = 4) the scheduler has nothing else to
// issue in between, so it issues one FFMA every ~4 cycles where it could issue one every cycle. This is
// the honest first kernel: the code is what anyone writes; the occupancy is that of a kernel whose
// registers or shared memory leave room for few warps.
// Napkin math: 2 * 2^20 * 8192 = 17.2 GFLOP per launch. Peak is sm_count * 128 FMA lanes * 2 FLOP *
// clock (~67 TFLOP/s on an H200 at 1.98 GHz); one FFMA per ~4 cycles per scheduler is ~25% of it: ~1 ms.
// Run: aisp bench run --targets ch06:ilp:01_one_chain
#include "chapters/ch06_cuda_basics/ilp/problem.hpp"

namespace aisp::ch06::ilp::v01 {

__global__ void one_chain_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n,
                                 int iters) {
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += threads) {
    float v = x[i];
#pragma unroll 16
    for (int k = 0; k < iters; ++k) v = fmaf(v, k_a, k_b);
    y[i] = v;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  one_chain_kernel<<<a.sm_count, block_threads(a), 0, stream>>>(a.x, a.y, a.n, a.iters);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(IlpProblem, launch, .step = 1, .slug = "one_chain", .kind = VariantKind::baseline,
                      .summary = "one dependent FMA chain per thread at a time (FFMA latency exposed)");

}  // namespace aisp::ch06::ilp::v01
