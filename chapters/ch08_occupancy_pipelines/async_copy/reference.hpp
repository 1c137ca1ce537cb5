// ch08:async_copy — the stencil every step computes, in plain C++ (the CPU reference and its tests).
//
// out[i] = sum_{k=0..8} w[k] * x[i - 4 + k], with x = 0 outside [0, n): a 9-point binomial smoothing
// (weights C(8, k) / 256, exact in fp32). Every step accumulates with fmaf in the order k = 0..8, so all
// of them, the GPU reference and this host code agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace aisp::ch08::async_copy {

inline constexpr int k_radius = 4;
inline constexpr int k_points = 2 * k_radius + 1;

// C(8, k) / 256; constexpr so that device code folds it too (nvcc --expt-relaxed-constexpr).
constexpr float stencil_weight(int k) {
  int c = 1;
  for (int i = 0; i < k; ++i) c = c * (2 * k_radius - i) / (i + 1);
  return static_cast<float>(c) / 256.0f;
}

// All nine weights as one constant object. Device code declares `constexpr StencilWeights w =
// stencil_weights();` so that the weights are folded into the FMAs as immediates at compile time; calling
// stencil_weight(k) inside an unrolled device loop is not guaranteed to be folded, and left at run time
// its integer divisions cost more than the stencil itself.
struct StencilWeights {
  float w[k_points];
};
constexpr StencilWeights stencil_weights() {
  StencilWeights s{};
  for (int k = 0; k < k_points; ++k) s.w[k] = stencil_weight(k);
  return s;
}

inline std::vector<double> stencil(const std::vector<double>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<double> out(x.size());
  for (std::int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int k = 0; k < k_points; ++k) {
      const std::int64_t j = i - k_radius + k;
      const float v = j >= 0 && j < n ? static_cast<float>(x[j]) : 0.0f;
      acc = std::fma(stencil_weight(k), v, acc);
    }
    out[i] = acc;
  }
  return out;
}

}  // namespace aisp::ch08::async_copy
