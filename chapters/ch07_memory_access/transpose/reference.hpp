// ch07:transpose — the host reference: out (cols x rows) = in (rows x cols) transposed, both row-major.
// Plain C++ (no CUDA headers) so that the CPU tests can check it; problem.hpp uses it at test sizes.
#pragma once

#include <cstddef>
#include <vector>

namespace aisp::ch07::transpose {

template <class T>
std::vector<T> transpose_reference(const std::vector<T>& in, std::size_t rows, std::size_t cols) {
  std::vector<T> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  }
  return out;
}

}  // namespace aisp::ch07::transpose
