// ch08:divergence — the trusted device reference: reference.hpp's function, one thread per element.
// The host reference checks it bit for bit at test sizes.
#include "chapters/ch08_occupancy_pipelines/divergence/problem.hpp"

namespace aisp::ch08::divergence {

__global__ void evaluate_reference_kernel(const float* x, float* ref, std::size_t n, std::int64_t terms) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const Coefficients k = x[i] >= 0.0f ? non_negative_coefficients() : negative_coefficients();
    float y = 0.0f, c = k.c0;
    for (std::int64_t t = 0; t < terms; ++t) {
      y = __fmaf_rn(y, x[i], c);
      c = __fmaf_rn(c, k.r, k.s);
    }
    ref[i] = y;
  }
}

void evaluate_reference(const Args& a, float* ref, cudaStream_t stream) {
  evaluate_reference_kernel<<<full_wave_blocks(a, 256), 256, 0, stream>>>(a.x, ref, a.n, a.terms);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch08::divergence
