// ch06:vector_add — the trusted device reference: one thread per element, nothing else. The host
// reference (reference.hpp) checks it at test sizes.
#include "chapters/ch06_cuda_basics/vector_add/problem.hpp"

namespace aisp::ch06::vector_add {

__global__ void add_reference_kernel(const float* a, const float* b, float* c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

void add_reference(const Args& a, float* ref, cudaStream_t stream) {
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((a.n + threads - 1) / threads);
  add_reference_kernel<<<blocks, threads, 0, stream>>>(a.a, a.b, ref, a.n);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch06::vector_add
