// ch06:launch_bounds — the host reference: every pixel's 8 channels times one 8x8 matrix,
// y[p][r] = sum_c m[r][c] * x[p][c], summed over c = 0..7 in order with one fused multiply-add per term
// (std::fma on floats rounds exactly like the GPU's FFMA). Plain C++ (no CUDA).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch06::launch_bounds {

inline constexpr int k_channels = 8;

// x: pixels * 8 values, m: 64 values row-major; returns pixels * 8 values.
inline std::vector<double> mix_channels(const std::vector<double>& x, const std::vector<double>& m) {
  std::vector<double> y(x.size());
  for (std::size_t p = 0; p + k_channels <= x.size(); p += k_channels) {
    for (int r = 0; r < k_channels; ++r) {
      float acc = 0.0f;
      for (int c = 0; c < k_channels; ++c) {
        acc = std::fma(static_cast<float>(m[r * k_channels + c]), static_cast<float>(x[p + c]), acc);
      }
      y[p + r] = acc;
    }
  }
  return y;
}

}  // namespace aisp::ch06::launch_bounds
