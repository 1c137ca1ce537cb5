// A row-major FP32 GEMM through cuBLASLt, shared by the ch09 ladders: the full-size reference of
// ch09:sgemm and ch09:fused_epilogue, and their vendor variants.
//
// Precision: CUBLAS_COMPUTE_32F with CUDA_R_32F scale, inputs and output is plain FP32 on the CUDA cores;
// TF32 tensor cores are only used with CUBLAS_COMPUTE_32F_FAST_TF32, which is never set here (cuBLASLt API
// reference, "cublasComputeType_t").
//
// Layout: cuBLASLt is column-major. A row-major C (m x n) = A (m x k) B (k x n) is, read column-major, the
// matrix C^T (n x m) = B^T (n x k) A^T (k x m); the row-major buffers of B, A and C *are* B^T, A^T and C^T
// in column-major order. So the call passes B as the first operand and A as the second, no transposes.
// An optional epilogue (bias + GELU) then adds a bias per row of C^T, that is per column of C.
//
// Host-only: the definitions live in lt_sgemm.cpp (compiled by the host compiler, where AISP_CUBLAS_CHECK
// and its fmt formatting build; nvcc's front end rejects fmt's consteval format strings).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "device/buffer.hpp"

namespace aisp::ch09 {

class LtSgemm {
 public:
  enum class Epilogue { none, bias_gelu };

  LtSgemm() = default;
  LtSgemm(const LtSgemm&) = delete;
  LtSgemm& operator=(const LtSgemm&) = delete;
  ~LtSgemm() { release(); }

  // Plans C = A B (or gelu(A B + bias) with Epilogue::bias_gelu, cuBLASLt's tanh form) for these sizes.
  void plan(int m, int n, int k, Epilogue epilogue = Epilogue::none);
  // Enqueues the planned GEMM on `stream`. `bias` (n floats) only with Epilogue::bias_gelu.
  void run(const float* a, const float* b, float* c, cudaStream_t stream, const float* bias = nullptr);

 private:
  void release();

  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_first = nullptr, m_second = nullptr, m_out = nullptr;
  cublasLtMatmulHeuristicResult_t m_algo{};
  DeviceBuffer<unsigned char> m_workspace;
  Epilogue m_epilogue = Epilogue::none;
};

}  // namespace aisp::ch09
