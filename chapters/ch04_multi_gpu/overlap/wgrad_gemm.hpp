// ch04:overlap — one layer's weight-gradient GEMM, dW = dY^T X, as a cuBLASLt plan made once and run many
// times: bf16 dY and X (tokens x hidden, row-major), fp32 accumulation, fp32 dW (hidden x hidden,
// row-major). The steps run one plan per rank, the gate's reference one on rank 0. Host code with CUDA
// headers, included by the ladder's .cu files and its GPU test.
//
// Why an fp32 output: it is the gradient DDP all-reduces by default (the parameters, and so their .grad,
// are fp32 under bf16 autocast), and what Megatron-LM's gradient-accumulation fusion writes straight from
// the wgrad GEMM into its fp32 main_grad buffer; no bf16 rounding of the gradient before the sum.
//
// The layout: cuBLAS is column-major, and a row-major r x c matrix is a column-major c x r one. So X
// (row-major tokens x hidden) is the column-major hidden x tokens matrix X^T, dY likewise dY^T, and the
// row-major dW is the column-major dW^T = X^T dY = (X^T) (dY^T)^T: A = X^T used as is, B = dY^T used
// transposed, C = dW^T with leading dimension hidden. An "NT" GEMM, the layout every framework's wgrad
// GEMM has (both operands stored with tokens, the reduced dimension, as the slow index).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "device/buffer.hpp"
#include "device/cublas_check.hpp"

namespace aisp::ch04::overlap {

class WgradGemm {
 public:
  // On the GPU it will run on (current): its workspace lives there. sm_count_target > 0 plans the GEMM for
  // that many SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: cuBLASLt's heuristic and grid then assume the rest
  // of the GPU is busy with a concurrent stream's work, step 05's NCCL kernels); 0 plans for the whole GPU.
  WgradGemm(int hidden, int tokens, int sm_count_target = 0) : m_workspace(k_workspace_bytes) {
    AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
    AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (sm_count_target > 0) {
      const std::int32_t sms = sm_count_target;
      AISP_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    const cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_T;
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_x_layout, CUDA_R_16BF, hidden, tokens, hidden));   // A = X^T
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_dy_layout, CUDA_R_16BF, hidden, tokens, hidden));  // B = dY^T
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_dw_layout, CUDA_R_32F, hidden, hidden, hidden));   // C = dW^T
    AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&m_pref));
    const std::size_t ws = k_workspace_bytes;
    AISP_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(m_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    AISP_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_x_layout, m_dy_layout, m_dw_layout,
                                                     m_dw_layout, m_pref, 1, &m_heuristic, &found));
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for the bf16 -> fp32 wgrad GEMM");
  }
  WgradGemm(const WgradGemm&) = delete;
  WgradGemm& operator=(const WgradGemm&) = delete;
  ~WgradGemm() {
    if (m_pref) cublasLtMatmulPreferenceDestroy(m_pref);
    if (m_dw_layout) cublasLtMatrixLayoutDestroy(m_dw_layout);
    if (m_dy_layout) cublasLtMatrixLayoutDestroy(m_dy_layout);
    if (m_x_layout) cublasLtMatrixLayoutDestroy(m_x_layout);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  // dw = dy^T x on `stream`, a stream of the plan's GPU, which must be current (the GEMM's kernels launch
  // on the current GPU). beta = 0: dw is overwritten, never accumulated into.
  void run(const __nv_bfloat16* dy, const __nv_bfloat16* x, float* dw, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_CUBLAS_CHECK(cublasLtMatmul(m_handle, m_op, &one, x, m_x_layout, dy, m_dy_layout, &zero, dw, m_dw_layout, dw,
                                     m_dw_layout, &m_heuristic.algo, m_workspace.data(), k_workspace_bytes, stream));
  }

 private:
  static constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;  // cuBLASLt's advice for Hopper
  DeviceBuffer<unsigned char> m_workspace;
  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_x_layout = nullptr, m_dy_layout = nullptr, m_dw_layout = nullptr;
  cublasLtMatmulPreference_t m_pref = nullptr;
  cublasLtMatmulHeuristicResult_t m_heuristic{};
};

}  // namespace aisp::ch04::overlap
