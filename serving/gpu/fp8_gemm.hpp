// The runner's FP8 matrix products (RunnerOptions::fp8_weights), beside gemm.hpp's bf16 Gemm:
//   out[r][c] = x_scale[r] * w_scale[c] * sum_i x[r][i] * w[c][i]
// with x [rows][k] and w [n][k] e4m3 codes (row-major, rows k bytes apart: both K-major, the "TN" layout
// that Hopper's FP8 tensor cores read), fp32 accumulation and a bf16 out. x_scale holds one scale per token
// (row of x) and w_scale one per output channel (row of w), as fp8_quant.cu makes them.
//
// Scaling: cuBLASLt's outer-vector mode (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9 and
// later, sm_90): A and B each get a vector of fp32 scales, and element (i, j) of the product is multiplied
// by A's i-th and B's j-th inside cuBLASLt's epilogue, before the single rounding to bf16. That is exactly
// per-token x per-channel scaling, with no fp32 intermediate in memory and no extra kernel; the
// alternative (unit scales, an fp32 output, a scaling kernel that rounds to bf16) would write and read
// rows x n fp32 values more per GEMM. Where cuBLASLt refuses the mode (another architecture, an older
// library) prepare() throws CublasError(CUBLAS_STATUS_NOT_SUPPORTED); the runner turns it into a refusal
// of the option.
//
// One plan per shape, cached, with the heuristic's first algorithm (no tuning). The scale vectors are
// descriptor attributes, set on the plan before every call (host work only, so a CUDA-graph capture
// records the call with this call's pointers). Accumulation promotes to fp32 (CUBLASLT_MATMUL_DESC_
// FAST_ACCUM off, cuBLASLt's default; ch19:fp8_gemm's README says what fast accumulation costs).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "device/buffer.hpp"

namespace aisp::serving::gpu {

class Fp8Gemm {
 public:
  // Throws CublasError(CUBLAS_STATUS_NOT_SUPPORTED) when cuBLASLt is older than 12.9 (no outer-vector
  // scaling).
  explicit Fp8Gemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Makes the plan of run()'s shape now (cuBLASLt's heuristic), so that no step makes one; throws
  // CublasError(CUBLAS_STATUS_NOT_SUPPORTED) when cuBLASLt has no algorithm for it. k % 16 == 0 and
  // n % 16 == 0 (16-byte rows of codes), ld_out % 8 == 0.
  void prepare(int rows, int n, int k, int ld_out, const float* x_scale, const float* w_scale);

  // out[rows][n] (row stride ld_out) = diag(x_scale) * (x * w^T) * diag(w_scale), see above. x and w
  // 16-byte aligned.
  void run(const std::uint8_t* x, const float* x_scale, const std::uint8_t* w, const float* w_scale,
           __nv_bfloat16* out, int ld_out, int rows, int n, int k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, int>;  // rows, n, k, ld_out
  static void destroy(Plan& p);
  // The shape's plan, made (with these scale pointers set) when new.
  Plan& plan_for(const Key& key, const float* x_scale, const float* w_scale);
  Plan make_plan(const Key& key, const float* x_scale, const float* w_scale);

  cublasLtHandle_t m_handle = nullptr;
  DeviceBuffer<std::byte> m_workspace;
  std::map<Key, Plan> m_plans;
};

}  // namespace aisp::serving::gpu
