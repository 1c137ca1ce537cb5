// ch08:softmax — the host reference: plain C++ in double, for the test sizes (no CUDA here).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch08::softmax {

// Row-wise softmax of a rows x cols row-major matrix. The max is subtracted before exp, so large inputs
// do not overflow (the same formula every step uses).
inline std::vector<double> softmax_rows(const std::vector<double>& x, std::size_t rows, std::size_t cols) {
  std::vector<double> y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * cols;
    double* out = y.data() + r * cols;
    const double m = *std::max_element(in, in + cols);
    double sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum += std::exp(in[c] - m);
    for (std::size_t c = 0; c < cols; ++c) out[c] = std::exp(in[c] - m) / sum;
  }
  return y;
}

}  // namespace aisp::ch08::softmax
