// ch08:layernorm — the host reference: plain C++ in double, for the test sizes (no CUDA here).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch08::layernorm {

// Row-wise layer norm of a rows x cols row-major matrix with per-column weight and bias: the biased
// variance (divided by cols), as nn.LayerNorm computes it, from a two-pass mean then variance.
inline std::vector<double> layernorm_rows(const std::vector<double>& x, const std::vector<double>& weight,
                                          const std::vector<double>& bias, std::size_t rows,
                                          std::size_t cols, double eps) {
  std::vector<double> y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * cols;
    double mean = 0;
    for (std::size_t c = 0; c < cols; ++c) mean += in[c];
    mean /= static_cast<double>(cols);
    double var = 0;
    for (std::size_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(cols);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = (in[c] - mean) * rstd * weight[c] + bias[c];
  }
  return y;
}

}  // namespace aisp::ch08::layernorm
