// ch08:rmsnorm — the host reference: plain C++ in double, for the test sizes (no CUDA here).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch08::rmsnorm {

// Row-wise RMS norm of a rows x cols row-major matrix with a per-column weight (no bias, no mean).
inline std::vector<double> rmsnorm_rows(const std::vector<double>& x, const std::vector<double>& weight,
                                        std::size_t rows, std::size_t cols, double eps) {
  std::vector<double> y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * cols;
    double squares = 0;
    for (std::size_t c = 0; c < cols; ++c) squares += in[c] * in[c];
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(cols) + eps);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = in[c] * rstd * weight[c];
  }
  return y;
}

}  // namespace aisp::ch08::rmsnorm
