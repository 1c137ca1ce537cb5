// ch09:intensity's device reference (declared in problem.hpp): one thread per element, the chain plain.
#include "chapters/ch09_intensity_fusion/intensity/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::intensity {

__global__ void fma_chain_reference_kernel(const float* __restrict__ x, float* __restrict__ y,
                                           std::size_t n, int fma_per_elem, float alpha, float beta) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int j = 0; j < fma_per_elem; ++j) v = fmaf(v, alpha, beta);
  y[i] = v;
}

void IntensityProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((m_n + threads - 1) / threads);
  fma_chain_reference_kernel<<<blocks, threads, 0, stream>>>(m_x.data(), m_ref.data(), m_n, m_fma,
                                                             k_alpha, k_beta);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch09::intensity
