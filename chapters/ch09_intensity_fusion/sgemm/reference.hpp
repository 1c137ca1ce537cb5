// ch09:sgemm host reference: C = A B for row-major FP32 matrices, accumulated in double so that it is the
// most accurate answer at hand (plain C++, no CUDA: compiled into the CPU tests too).
#pragma once

#include <cstddef>
#include <vector>

namespace aisp::ch09::sgemm {

// a: m x k, b: k x n, both row-major; returns c: m x n row-major.
inline std::vector<double> reference_gemm(const std::vector<double>& a, const std::vector<double>& b,
                                          int m, int n, int k) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      const double aip = a[static_cast<std::size_t>(i) * k + p];
      for (int j = 0; j < n; ++j) {
        c[static_cast<std::size_t>(i) * n + j] += aip * b[static_cast<std::size_t>(p) * n + j];
      }
    }
  }
  return c;
}

// The atol of the ladder's tolerance for reduction length k (see SgemmProblem::tolerance): FP32 sums of
// k products of values in [-1, 1) in different orders differ by far less than k * 2^-20.
inline double gemm_atol(int k) { return static_cast<double>(k) * (1.0 / (1 << 20)); }

}  // namespace aisp::ch09::sgemm
