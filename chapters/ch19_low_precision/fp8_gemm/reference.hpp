// ch19:fp8_gemm — the host reference: the exact arithmetic on e4m3 codes and fp32 scales, as the device
// reference computes it (problem.hpp describes the scaling modes and layouts).
//
// Plain C++ (no CUDA headers): the CPU tests check it on hand-made cases, and the GPU test checks the
// device reference with it at the test size.
#pragma once

#include <cstdint>
#include <vector>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"  // round_to_bf16
#include "chapters/ch19_low_precision/common/quant.hpp"

namespace aisp::ch19::fp8_gemm {

constexpr int k_host_scale_block = 128;

// a: m x k codes, b: n x k codes (both K contiguous). scale_block 0: sa and sb hold one scale each;
// 128: sa is [k/128][m], sb is [k/128][n/128]. Each 128-wide K block (the whole K at per-tensor) is
// summed in fp32 in k order (every product of two e4m3 values is exact in fp32), then scaled and added
// in fp32; per-tensor scales apply once at the end. Returns c (m x n) rounded to bf16, as doubles.
inline std::vector<double> gemm_fp8_tn(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                                       const std::vector<float>& sa, const std::vector<float>& sb, int m, int n,
                                       int k, int scale_block) {
  std::vector<double> c(static_cast<std::size_t>(m) * n);
  const int block = scale_block == 0 ? k : k_host_scale_block;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float total = 0.0f;
      for (int k0 = 0; k0 < k; k0 += block) {
        float partial = 0.0f;
        for (int kk = k0; kk < k0 + block; ++kk) {
          partial += e4m3_decode(a[static_cast<std::size_t>(i) * k + kk]) *
                     e4m3_decode(b[static_cast<std::size_t>(j) * k + kk]);
        }
        if (scale_block == 0) {
          total = partial * (sa[0] * sb[0]);
        } else {
          const int kb = k0 / block;
          total += partial * (sa[static_cast<std::size_t>(kb) * m + i] *
                              sb[static_cast<std::size_t>(kb) * (n / block) + j / block]);
        }
      }
      c[static_cast<std::size_t>(i) * n + j] = ch10::hgemm::round_to_bf16(total);
    }
  }
  return c;
}

}  // namespace aisp::ch19::fp8_gemm
