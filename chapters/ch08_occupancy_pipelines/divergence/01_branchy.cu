// ch08:divergence:01_branchy — an if/else on the sign of x, each side with its own loop (the baseline).
//
// What: a grid-stride loop over the elements; for each, `if (x >= 0)` runs the polynomial with the first
// coefficient recurrence, `else` with the second. This is how the function reads on paper, and how a
// competent first version is written.
// Why it is slow on a GPU: the 32 lanes of a warp share one instruction stream. When some lanes take the
// `if` and others the `else` (half and half with these inputs), the warp runs both loops one after the
// other, each with the other half of its lanes masked off: the FMA units do useful work half the time.
// Napkin math: 34.4 GFLOP of useful FMAs at the defaults, issued as if it were 68.7; expect about twice
// the time of the branch-free step, i.e. at most ~50% of the FMA ceiling.
// Run: aisp bench run --targets ch08:divergence:01_branchy
#include "chapters/ch08_occupancy_pipelines/divergence/problem.hpp"

namespace aisp::ch08::divergence::v01 {

__global__ void branchy_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n,
                               std::int64_t terms) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    constexpr Coefficients pos = non_negative_coefficients(), neg = negative_coefficients();
    const float v = x[i];
    float acc = 0.0f;
    if (v >= 0.0f) {
      float c = pos.c0;
      for (std::int64_t t = 0; t < terms; ++t) {
        acc = __fmaf_rn(acc, v, c);
        c = __fmaf_rn(c, pos.r, pos.s);
      }
    } else {
      float c = neg.c0;
      for (std::int64_t t = 0; t < terms; ++t) {
        acc = __fmaf_rn(acc, v, c);
        c = __fmaf_rn(c, neg.r, neg.s);
      }
    }
    y[i] = acc;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  branchy_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.x, a.y, a.n, a.terms);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(DivergenceProblem, launch, .step = 1, .slug = "branchy", .kind = VariantKind::baseline,
                      .summary = "if/else on the sign, one loop per side: a mixed warp runs both");

}  // namespace aisp::ch08::divergence::v01
