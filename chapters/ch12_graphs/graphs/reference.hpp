// ch12:graphs — the host reference of the kernel chain. Plain C++ (no CUDA headers) so that the CPU test
// can check it; problem.hpp uses it.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch12::graphs {

// The ranges the problem draws its per-step coefficients from. A scale near 1 keeps the chain's product
// of scales O(1) after hundreds of steps (a random walk in log space: ~0.0115 * sqrt(K) for scales
// uniform in [0.98, 1.02)), so the output still depends on the input x at the default K = 128; scales
// well under 1 would shrink x's contribution to nothing and let a constant answer pass the second seed.
inline constexpr double k_scale_lo = 0.98, k_scale_hi = 1.02;
inline constexpr double k_shift_lo = -0.01, k_shift_hi = 0.01;

// One step of the chain, exactly as every kernel computes it: one fused multiply-add in fp32.
// std::fma on floats is correctly rounded like CUDA's fmaf, so host and device agree bit for bit.
inline float chain_step(float scale, float value, float shift) { return std::fma(scale, value, shift); }

// out[i] = step_{K-1}(... step_1(step_0(x[i])) ...), step_k(v) = fma(scale[k], v, shift[k]), K =
// scale.size(). The order of the steps is the order of the kernels.
inline std::vector<float> chain_reference(const std::vector<float>& x, const std::vector<float>& scale,
                                          const std::vector<float>& shift) {
  std::vector<float> out(x);
  for (std::size_t k = 0; k < scale.size(); ++k) {
    for (float& v : out) v = chain_step(scale[k], v, shift[k]);
  }
  return out;
}

}  // namespace aisp::ch12::graphs
