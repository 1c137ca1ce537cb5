// ch10:hgemm — the host reference: C = A * B^T for bf16 inputs, fp32 accumulation, bf16 output.
//
// Plain C++ (no CUDA headers), so that the CPU tests can check it on hand-made cases and the GPU test can
// check the device reference (cuBLASLt) with it at the test size. Values travel as doubles holding the
// exact bf16 inputs; the output is rounded to bf16 once, at the end, as every variant does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace aisp::ch10::hgemm {

// Round a float to the nearest bf16 (ties to even) and back: what __float2bfloat16_rn does on the device.
inline float round_to_bf16(float x) {
  if (std::isnan(x)) return x;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);  // add half an ulp (and one more bit on ties to odd): carry rounds up
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// a: m x k row-major, b: n x k row-major (both K contiguous, "TN"), returns c: m x n row-major.
// The dot products accumulate in fp32 in k order, like one thread of a simple GEMM would.
inline std::vector<double> gemm_tn(const std::vector<double>& a, const std::vector<double>& b, int m, int n,
                                   int k) {
  std::vector<double> c(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    const double* ai = &a[static_cast<std::size_t>(i) * k];
    for (int j = 0; j < n; ++j) {
      const double* bj = &b[static_cast<std::size_t>(j) * k];
      float acc = 0.0f;
      for (int kk = 0; kk < k; ++kk) acc += static_cast<float>(ai[kk]) * static_cast<float>(bj[kk]);
      c[static_cast<std::size_t>(i) * n + j] = round_to_bf16(acc);
    }
  }
  return c;
}

}  // namespace aisp::ch10::hgemm
