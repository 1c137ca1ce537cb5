// ch08:divergence:02_predicated — select the coefficients, then run one loop for every lane.
//
// What changed: the branch moves from around the loop to before it. Each lane picks its three
// coefficients (c0, r, s) with a select on the sign (SEL/FSEL in SASS, no jump), and every lane then runs
// the same loop. The FMAs each lane performs, and their order, are exactly those of step 01, so the
// output is the same bit for bit.
// Why it helps: the warp now issues one loop instead of two, and every lane's FMA is useful. Divergence is
// not about `if` statements, it is about lanes of one warp needing different instruction streams: when
// the sides differ only in data, turn the control difference into a data difference.
// Napkin math: 34.4 GFLOP at the defaults at the measured FMA rate (~61 TFLOP/s on an H200) is ~0.56 ms;
// two dependent FMA chains per thread and a full SM of warps hide the FMA latency, so expect close to it.
// Run: aisp bench run --targets ch08:divergence:02_predicated
#include "chapters/ch08_occupancy_pipelines/divergence/problem.hpp"

namespace aisp::ch08::divergence::v02 {

__global__ void predicated_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n,
                                  std::int64_t terms) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    constexpr Coefficients pos = non_negative_coefficients(), neg = negative_coefficients();
    const float v = x[i];
    const bool non_negative = v >= 0.0f;
    float c = non_negative ? pos.c0 : neg.c0;
    const float r = non_negative ? pos.r : neg.r;
    const float s = non_negative ? pos.s : neg.s;
    float acc = 0.0f;
    for (std::int64_t t = 0; t < terms; ++t) {
      acc = __fmaf_rn(acc, v, c);
      c = __fmaf_rn(c, r, s);
    }
    y[i] = acc;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  predicated_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.x, a.y, a.n, a.terms);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(DivergenceProblem, launch, .step = 2, .slug = "predicated", .kind = VariantKind::optimized,
                      .summary = "coefficients selected per lane, one loop for all: same FMAs, no divergence");

}  // namespace aisp::ch08::divergence::v02
