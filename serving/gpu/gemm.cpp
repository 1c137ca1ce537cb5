// cuBLASLt for the runner's Linear layers. cuBLASLt is column-major: a row-major [rows][n] output is a
// column-major n x rows matrix, so out^T = w * x^T with A = w (stored k x n column-major, transposed by the
// op: CUBLAS_OP_T), B = x^T (k x rows column-major, leading dimension ld_x), D = out^T (n x rows, ld_out).
// The heuristic is asked once per shape; its first answer (the fastest it predicts) is kept.
#include "serving/gpu/gemm.hpp"

#include <string>

#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

Gemm::Gemm(std::size_t workspace_bytes) : m_workspace(workspace_bytes) {
  AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
}

Gemm::~Gemm() {
  for (auto& [key, plan] : m_plans) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatmulDescDestroy(plan.op);
  }
  if (m_handle) cublasLtDestroy(m_handle);
}

const Gemm::Plan& Gemm::plan_for(const Key& key) {
  if (const auto it = m_plans.find(key); it != m_plans.end()) return it->second;
  const auto [rows, n, k, ld_x, ld_out] = key;
  Plan p;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, rows, ld_x));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, n, rows, ld_out));

  cublasLtMatmulPreference_t pref = nullptr;
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t workspace = m_workspace.bytes();
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(m_handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.op);
    AISP_CUBLAS_CHECK(status);
    throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED,
                      "cuBLASLt has no algorithm for the bf16 GEMM rows=" + std::to_string(rows) +
                          " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  p.algo = result.algo;
  return m_plans.emplace(key, p).first->second;
}

void Gemm::run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out, int rows,
               int n, int k, cudaStream_t stream) {
  if (rows == 0) return;
  const Plan& p = plan_for({rows, n, k, ld_x, ld_out});
  const float alpha = 1.0f, beta = 0.0f;
  AISP_CUBLAS_CHECK(cublasLtMatmul(m_handle, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.d, out, p.d, &p.algo,
                                   m_workspace.data(), m_workspace.bytes(), stream));
}

}  // namespace aisp::serving::gpu
