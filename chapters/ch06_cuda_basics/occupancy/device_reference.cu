// ch06:occupancy — the trusted device reference: one thread per element, 256-thread blocks whatever
// the axis says. The host reference (reference.hpp) checks it at test sizes.
#include "chapters/ch06_cuda_basics/occupancy/problem.hpp"

namespace aisp::ch06::occupancy {

__global__ void affine_reference_kernel(const float* x, float* y, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(k_alpha, x[i], k_beta);
}

void affine_reference(const Args& a, float* ref, cudaStream_t stream) {
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((a.n + threads - 1) / threads);
  affine_reference_kernel<<<blocks, threads, 0, stream>>>(a.x, ref, a.n);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch06::occupancy
