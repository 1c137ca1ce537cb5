// ch07:bank_conflicts — the trusted device reference: each element copied straight to where `passes`
// tile transposes put it (reference.hpp says where), one thread per element, no shared memory.
#include "chapters/ch07_memory_access/bank_conflicts/problem.hpp"

namespace aisp::ch07::bank_conflicts {

__global__ void tile_passes_reference_kernel(const float* in, float* ref, std::int64_t n, bool transpose) {
  const std::size_t total = static_cast<std::size_t>(n) * n;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::size_t r = i / n, c = i % n;
    ref[transpose ? c * n + r : i] = in[i];
  }
}

void tile_passes_reference(const Args& a, float* ref, cudaStream_t stream) {
  tile_passes_reference_kernel<<<1024, 256, 0, stream>>>(a.in, ref, a.n, a.passes % 2 == 1);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch07::bank_conflicts
