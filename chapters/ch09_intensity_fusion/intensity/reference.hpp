// ch09:intensity host reference: y[i] = f^F(x[i]) with f(v) = fma(v, alpha, beta) in FP32, F = fma_per_elem.
// std::fma on floats is the IEEE fused multiply-add with one rounding, exactly what the GPU's FFMA does, so
// host and device agree bit for bit (plain C++, no CUDA: in the CPU tests too).
#pragma once

#include <cmath>
#include <vector>

namespace aisp::ch09::intensity {

// The chain's constants: alpha = 1 - 2^-10 and beta = 2^-10 are exact in FP32 and keep every value bounded
// (the chain contracts towards 1), so no FMA can overflow or be skipped.
constexpr float k_alpha = 1.0f - 1.0f / 1024.0f;
constexpr float k_beta = 1.0f / 1024.0f;

inline float fma_chain(float v, int fma_per_elem) {
  for (int j = 0; j < fma_per_elem; ++j) v = std::fma(v, k_alpha, k_beta);
  return v;
}

inline std::vector<double> reference_chain(const std::vector<double>& x, int fma_per_elem) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = fma_chain(static_cast<float>(x[i]), fma_per_elem);
  return y;
}

}  // namespace aisp::ch09::intensity
