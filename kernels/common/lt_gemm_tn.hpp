// kernels/common/lt_gemm_tn.hpp — cuBLASLt's bf16 "TN" GEMM plan (C = A * B^T, row-major, fp32 compute),
// made once and run many times: the vendor reference of more than one ladder. Host code; included by .cu
// files, so errors are plain exceptions (device/cublas_check.hpp's macro formats with fmt, whose
// header-only build nvcc cannot compile).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "device/buffer.hpp"

namespace aisp {

inline void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLASLt: ") + what + " failed: " + cublasLtGetStatusString(status));
  }
}
#define AISP_LT_CHECK(expr) ::aisp::lt_check((expr), #expr)

// One cuBLASLt plan for C = A * B^T on row-major bf16 data. cuBLAS is column-major, and a row-major
// M x N matrix is a column-major N x M one; so it computes C^T = B * A^T (N x M, leading dimension N),
// where B (row-major N x K) is the column-major K x N matrix used transposed and A (row-major M x K) is
// the column-major K x M matrix A^T used as is: the "TN" GEMM cuBLAS runs fastest.
// Used by ch10:hgemm (its reference and vendor_cublas), ch19:fp8_gemm step 01, ch04:tensor_parallel_gemm
// (its two GEMMs per rank and its reference) and ch19:weight_only_gemv's
// vendor (m = batch: y = x W^T).
class LtGemmTn {
 public:
  LtGemmTn(int m, int n, int k) : m_workspace(k_workspace_bytes) {
    AISP_LT_CHECK(cublasLtCreate(&m_handle));
    AISP_LT_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    AISP_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    AISP_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    AISP_LT_CHECK(cublasLtMatrixLayoutCreate(&m_b_layout, CUDA_R_16BF, k, n, k));  // cuBLAS's "A"
    AISP_LT_CHECK(cublasLtMatrixLayoutCreate(&m_a_layout, CUDA_R_16BF, k, m, k));  // cuBLAS's "B"
    AISP_LT_CHECK(cublasLtMatrixLayoutCreate(&m_c_layout, CUDA_R_16BF, n, m, n));
    AISP_LT_CHECK(cublasLtMatmulPreferenceCreate(&m_pref));
    const std::size_t ws = k_workspace_bytes;
    AISP_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(m_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    AISP_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_b_layout, m_a_layout, m_c_layout, m_c_layout,
                                                     m_pref, 1, &m_heuristic, &found));
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for this bf16 GEMM");
  }
  LtGemmTn(const LtGemmTn&) = delete;
  LtGemmTn& operator=(const LtGemmTn&) = delete;
  ~LtGemmTn() {
    if (m_pref) cublasLtMatmulPreferenceDestroy(m_pref);
    if (m_c_layout) cublasLtMatrixLayoutDestroy(m_c_layout);
    if (m_a_layout) cublasLtMatrixLayoutDestroy(m_a_layout);
    if (m_b_layout) cublasLtMatrixLayoutDestroy(m_b_layout);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  void run(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_LT_CHECK(cublasLtMatmul(m_handle, m_op, &one, b, m_b_layout, a, m_a_layout, &zero, c, m_c_layout, c,
                                     m_c_layout, &m_heuristic.algo, m_workspace.data(), k_workspace_bytes, stream));
  }

 private:
  static constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;  // cuBLASLt's advice for Hopper
  DeviceBuffer<unsigned char> m_workspace;
  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_a_layout = nullptr, m_b_layout = nullptr, m_c_layout = nullptr;
  cublasLtMatmulPreference_t m_pref = nullptr;
  cublasLtMatmulHeuristicResult_t m_heuristic{};
};

}  // namespace aisp
