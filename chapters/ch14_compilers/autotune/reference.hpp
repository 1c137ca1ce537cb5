// ch14:autotune — the host reference and the tolerance of the GEMM ladder. Plain C++ (no CUDA headers) so
// that the CPU tests check both; problem.hpp uses them.
#pragma once

#include <cstddef>
#include <vector>

namespace aisp::ch14::autotune {

// C = A B in double, row-major A (m x k), B (k x n).
template <class T>
std::vector<double> gemm_reference(const std::vector<T>& a, const std::vector<T>& b, int m, int n, int k) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      const double aip = static_cast<double>(a[static_cast<std::size_t>(i) * k + p]);
      for (int j = 0; j < n; ++j) {
        c[static_cast<std::size_t>(i) * n + j] += aip * static_cast<double>(b[static_cast<std::size_t>(p) * n + j]);
      }
    }
  }
  return c;
}

// The absolute tolerance of an FP32 GEMM output against the exact value, inputs uniform in [-1, 1):
// atol = 16 u k with u = 2^-24 (k = 4096: 3.9e-3).
//
// Why: an output is a sum of k products of size <= 1 whose partial sums are a random walk of size ~sqrt(j)
// / 3 after j terms. Round-to-nearest errors are unbiased and close to independent (Higham & Mary, SIAM J.
// Sci. Comput. 41(5), 2019), so an FP32 sum in any order, with or without FMA, errs by a few u * sqrt(sum_j
// S_j^2) ~ 0.1 u k. 16 u k is over a hundred standard deviations: no false FAIL at any size. It still fails
// what matters: one skipped k step of 8 products moves an output by ~sqrt(8) / 3 ~ 1, and TF32 inputs (an
// 11-bit mantissa) by ~2^-12 sqrt(k) / 3 ~ 5e-3 at k = 4096 (cpu_test_autotune.cpp checks both margins).
inline double gemm_atol(int k) { return 16.0 * static_cast<double>(k) / 16777216.0; }

}  // namespace aisp::ch14::autotune
