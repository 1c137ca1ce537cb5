// cuBLASLt's FP8 GEMM for the runner's fp8_weights path (fp8_gemm.hpp). The layout is gemm.cpp's: cuBLASLt
// is column-major, so the row-major out[rows][n] is computed as out^T = w * x^T with cuBLASLt's A = w (k x n
// column-major, i.e. [n][k] row-major, transposed by the op) and B = x^T (k x rows column-major, i.e.
// [rows][k] row-major). cuBLASLt's M is then our n and its N our rows, so in outer-vector mode A's scale
// vector (M entries) is the per-channel weight scale and B's (N entries) the per-token activation scale.
#include "serving/gpu/fp8_gemm.hpp"

#include <string>

#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

namespace {

// cuBLASLt's version number is major * 10000 + minor * 100 + patch; outer-vector scaling came in 12.9.
constexpr std::size_t k_first_outer_vector_version = 120900;

void set_scales(cublasLtMatmulDesc_t op, const float* x_scale, const float* w_scale) {
  const void* a_scale = w_scale;  // cuBLASLt's A is the weight (see the file's head)
  const void* b_scale = x_scale;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
}

}  // namespace

Fp8Gemm::Fp8Gemm(std::size_t workspace_bytes) : m_workspace(workspace_bytes) {
  const std::size_t version = cublasLtGetVersion();
  if (version < k_first_outer_vector_version) {
    throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED,
                      "cuBLASLt " + std::to_string(version) +
                          " lacks outer-vector FP8 scaling (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, from 12.9)");
  }
  AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [key, plan] : m_plans) destroy(plan);
  if (m_handle) cublasLtDestroy(m_handle);
}

void Fp8Gemm::destroy(Plan& p) {  // also a plan whose making failed half way: some handles may be null
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
}

Fp8Gemm::Plan Fp8Gemm::make_plan(const Key& key, const float* x_scale, const float* w_scale) {
  const auto [rows, n, k, ld_out] = key;
  Plan p;
  // Any failure below leaves p's descriptors to `destroy` before the error goes on.
  try {
    AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    const cublasLtMatmulMatrixScale_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof outer));
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof outer));
    set_scales(p.op, x_scale, w_scale);
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n, k));
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, rows, k));
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, n, rows, ld_out));

    cublasLtMatmulPreference_t pref = nullptr;
    AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t workspace = m_workspace.bytes();
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace, sizeof workspace);
    cublasLtMatmulHeuristicResult_t first{};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      // C (unused: beta = 0) takes D's layout, bf16, as FP8 matmuls with a bf16 D require.
      status = cublasLtMatmulAlgoGetHeuristic(m_handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &first, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    AISP_CUBLAS_CHECK(status);
    if (found == 0) {
      throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED,
                        "cuBLASLt has no algorithm for the FP8 GEMM (outer-vector scales) rows=" +
                            std::to_string(rows) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
    p.algo = first.algo;
  } catch (...) {
    destroy(p);
    throw;
  }
  return p;
}

Fp8Gemm::Plan& Fp8Gemm::plan_for(const Key& key, const float* x_scale, const float* w_scale) {
  if (const auto it = m_plans.find(key); it != m_plans.end()) return it->second;
  return m_plans.emplace(key, make_plan(key, x_scale, w_scale)).first->second;
}

void Fp8Gemm::prepare(int rows, int n, int k, int ld_out, const float* x_scale, const float* w_scale) {
  if (rows > 0) (void)plan_for({rows, n, k, ld_out}, x_scale, w_scale);
}

void Fp8Gemm::run(const std::uint8_t* x, const float* x_scale, const std::uint8_t* w, const float* w_scale,
                  __nv_bfloat16* out, int ld_out, int rows, int n, int k, cudaStream_t stream) {
  if (rows == 0) return;
  Plan& p = plan_for({rows, n, k, ld_out}, x_scale, w_scale);
  // Every layer has its own weight scales and shares the shape's plan: the pointers change per call.
  set_scales(p.op, x_scale, w_scale);
  const float alpha = 1.0f, beta = 0.0f;
  AISP_CUBLAS_CHECK(cublasLtMatmul(m_handle, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.d, out, p.d, &p.algo,
                                   m_workspace.data(), m_workspace.bytes(), stream));
}

}  // namespace aisp::serving::gpu
