// ch09's cuBLASLt FP32 GEMM (lt_sgemm.hpp says what and why).
#include "chapters/ch09_intensity_fusion/common/lt_sgemm.hpp"

#include <stdexcept>

#include "device/cublas_check.hpp"

namespace aisp::ch09 {

namespace {
// What cuBLASLt's documentation recommends for Hopper.
constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;
}  // namespace

void LtSgemm::plan(int m, int n, int k, Epilogue epilogue) {
  release();
  AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
                                                   sizeof no_transpose));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                                   sizeof no_transpose));
  m_epilogue = epilogue;
  if (epilogue == Epilogue::bias_gelu) {
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_BIAS;
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
  }
  // Column-major views (lt_sgemm.hpp): first operand B^T (n x k), second A^T (k x m), output C^T (n x m).
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_first, CUDA_R_32F, n, k, n));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_second, CUDA_R_32F, k, m, k));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&m_out, CUDA_R_32F, n, m, n));

  m_workspace = DeviceBuffer<unsigned char>(k_workspace_bytes);
  cublasLtMatmulPreference_t pref = nullptr;
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t ws = k_workspace_bytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_first, m_second, m_out, m_out, pref, 1,
                                            &m_algo, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  AISP_CUBLAS_CHECK(status);
  if (found == 0) throw std::runtime_error("cuBLASLt found no FP32 algorithm for this GEMM");
}

void LtSgemm::run(const float* a, const float* b, float* c, cudaStream_t stream, const float* bias) {
  if (m_epilogue == Epilogue::bias_gelu) {
    AISP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const float one = 1.0f, zero = 0.0f;
  AISP_CUBLAS_CHECK(cublasLtMatmul(m_handle, m_op, &one, b, m_first, a, m_second, &zero, c, m_out, c, m_out,
                                   &m_algo.algo, m_workspace.data(), m_workspace.bytes(), stream));
}

void LtSgemm::release() {
  if (m_out) cublasLtMatrixLayoutDestroy(m_out);
  if (m_second) cublasLtMatrixLayoutDestroy(m_second);
  if (m_first) cublasLtMatrixLayoutDestroy(m_first);
  if (m_op) cublasLtMatmulDescDestroy(m_op);
  if (m_handle) cublasLtDestroy(m_handle);
  m_out = m_second = m_first = nullptr;
  m_op = nullptr;
  m_handle = nullptr;
}

}  // namespace aisp::ch09
