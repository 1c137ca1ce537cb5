// ch06:ilp — the trusted device reference: one thread per element, one chain each, full grid. The host
// reference (reference.hpp) checks it at test sizes.
#include "chapters/ch06_cuda_basics/ilp/problem.hpp"

namespace aisp::ch06::ilp {

__global__ void chains_reference_kernel(const float* x, float* y, std::size_t n, int iters) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < iters; ++k) v = fmaf(v, k_a, k_b);
  y[i] = v;
}

void chains_reference(const Args& a, float* ref, cudaStream_t stream) {
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((a.n + threads - 1) / threads);
  chains_reference_kernel<<<blocks, threads, 0, stream>>>(a.x, ref, a.n, a.iters);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch06::ilp
