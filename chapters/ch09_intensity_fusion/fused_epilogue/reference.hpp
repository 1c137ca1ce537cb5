// ch09:fused_epilogue host reference: C = gelu(A B + bias), bias broadcast along the rows (one value per
// column of C), GELU in its tanh form, everything in double (plain C++, no CUDA: in the CPU tests too).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "chapters/ch09_intensity_fusion/sgemm/reference.hpp"

namespace aisp::ch09::fused_epilogue {

// GELU, tanh form (Hendrycks & Gimpel 2016, eq. for the fast approximation; the form cuBLASLt's
// CUBLASLT_EPILOGUE_GELU and PyTorch's gelu(approximate="tanh") use):
//   gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
inline double gelu_tanh(double x) {
  const double sqrt_2_over_pi = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
}

inline std::vector<double> reference_fused(const std::vector<double>& a, const std::vector<double>& b,
                                           const std::vector<double>& bias, int m, int n, int k) {
  std::vector<double> c = sgemm::reference_gemm(a, b, m, n, k);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = gelu_tanh(c[i] + bias[i % n]);
  return c;
}

}  // namespace aisp::ch09::fused_epilogue
