// ch06:occupancy — the host reference: y[i] = fma(alpha, x[i], beta) in fp32, one rounding, as the GPU's
// FFMA computes it. Plain C++ (no CUDA): tested by cpu_test_occupancy.cpp; the constants are shared with
// the device code.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch06::occupancy {

inline constexpr float k_alpha = 1.5f;
inline constexpr float k_beta = -0.25f;

inline std::vector<double> affine(const std::vector<double>& x, float alpha = k_alpha, float beta = k_beta) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::fma(alpha, static_cast<float>(x[i]), beta);
  return y;
}

}  // namespace aisp::ch06::occupancy
