// ch09:fused_norm — the host reference: plain C++ in double, for the test sizes (no CUDA here).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch09::fused_norm {

// Rounds to the nearest bf16 value (8 significant bits), ties to even, as __float2bfloat16_rn and
// __double2bfloat16 do on the device. For normal values (|v| >= 2^-126) and below bf16's overflow: the
// ladder's data never leaves that range. std::nearbyint rounds ties to even in the default rounding mode.
inline double round_to_bf16(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

struct AddNormRows {
  std::vector<double> h;  // x + residual, rounded to bf16: the residual stream the next layer reads
  std::vector<double> y;  // rmsnorm(h) * weight, unrounded
};

// Per row of rows x cols row-major matrices: h = bf16(x + residual), y = h / sqrt(mean(h^2) + eps) * w.
// The norm reads the rounded h, as the next layer and an unfused model do (see problem.hpp).
inline AddNormRows add_rmsnorm_rows(const std::vector<double>& x, const std::vector<double>& residual,
                                    const std::vector<double>& weight, std::size_t rows, std::size_t cols,
                                    double eps) {
  AddNormRows out{std::vector<double>(rows * cols), std::vector<double>(rows * cols)};
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t base = r * cols;
    double squares = 0;
    for (std::size_t c = 0; c < cols; ++c) {
      const double h = round_to_bf16(x[base + c] + residual[base + c]);
      out.h[base + c] = h;
      squares += h * h;
    }
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(cols) + eps);
    for (std::size_t c = 0; c < cols; ++c) out.y[base + c] = out.h[base + c] * rstd * weight[c];
  }
  return out;
}

}  // namespace aisp::ch09::fused_norm
