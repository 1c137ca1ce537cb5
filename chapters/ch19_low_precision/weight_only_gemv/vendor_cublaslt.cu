// ch19:weight_only_gemv:vendor_cublaslt — cuBLASLt's bf16 GEMM with m = batch (bf16 in, fp32 compute,
// bf16 out): what a framework runs for an unquantized Linear layer at decode time. It exists only for
// bits = 16: cuBLASLt has no weight-only int8/int4 GEMM (its integer GEMMs quantize both operands), so at
// the quantized formats setup() reports the variant SKIPPED and the comparison is across the format sweep
// (this variant at bits = 16 against the steps at 8 and 4).
//
// The plan (handle, layouts, the heuristic's first algorithm, 32 MiB workspace) is made once in setup(),
// so a launch is the matmul alone. Row-major y = x W^T is, in cuBLAS's column-major terms, y^T = W x^T:
// W (row-major n x k) is the column-major k x n matrix used transposed, x (row-major batch x k) the
// column-major k x batch matrix used as is, y^T column-major n x batch with leading dimension n: the "TN"
// GEMM (the plan of ch10:hgemm's LtGemmTn, copied here: a ladder never includes another ladder).
// Run: aisp bench run --targets ch19:weight_only_gemv:vendor_cublaslt --axis bits=16
#include <cublasLt.h>

#include <stdexcept>
#include <string>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"

namespace aisp::ch19::weight_only_gemv::vendor {

// cuBLASLt errors as exceptions. device/cublas_check.hpp's AISP_CUBLAS_CHECK formats with fmt, whose
// header-only build nvcc cannot compile.
void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("ch19:weight_only_gemv: ") + what + " failed: " + cublasLtGetStatusString(status));
  }
}
#define AISP_GEMV_LT_CHECK(expr) lt_check((expr), #expr)

class CublasLt {
 public:
  CublasLt() = default;
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  ~CublasLt() {
    if (m_pref) cublasLtMatmulPreferenceDestroy(m_pref);
    if (m_y_layout) cublasLtMatrixLayoutDestroy(m_y_layout);
    if (m_x_layout) cublasLtMatrixLayoutDestroy(m_x_layout);
    if (m_w_layout) cublasLtMatrixLayoutDestroy(m_w_layout);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  void setup(const Args& a, cudaStream_t) {
    if (a.bits != 16) throw VariantUnavailable("cuBLASLt has no weight-only int8/int4 GEMM");
    m_workspace = DeviceBuffer<unsigned char>(k_workspace_bytes);
    AISP_GEMV_LT_CHECK(cublasLtCreate(&m_handle));
    AISP_GEMV_LT_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_w = CUBLAS_OP_T, trans_x = CUBLAS_OP_N;
    AISP_GEMV_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_w, sizeof trans_w));
    AISP_GEMV_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_x, sizeof trans_x));
    AISP_GEMV_LT_CHECK(cublasLtMatrixLayoutCreate(&m_w_layout, CUDA_R_16BF, a.k, a.n, a.k));      // cuBLAS's "A"
    AISP_GEMV_LT_CHECK(cublasLtMatrixLayoutCreate(&m_x_layout, CUDA_R_16BF, a.k, a.batch, a.k));  // cuBLAS's "B"
    AISP_GEMV_LT_CHECK(cublasLtMatrixLayoutCreate(&m_y_layout, CUDA_R_16BF, a.n, a.batch, a.n));
    AISP_GEMV_LT_CHECK(cublasLtMatmulPreferenceCreate(&m_pref));
    const std::size_t ws = k_workspace_bytes;
    AISP_GEMV_LT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(m_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    AISP_GEMV_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_w_layout, m_x_layout, m_y_layout, m_y_layout,
                                                      m_pref, 1, &m_heuristic, &found));
    if (found == 0) throw VariantUnavailable("cuBLASLt has no algorithm for this bf16 GEMM");
  }

  void launch(const Args& a, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_GEMV_LT_CHECK(cublasLtMatmul(m_handle, m_op, &one, a.w, m_w_layout, a.x, m_x_layout, &zero, a.y, m_y_layout,
                                      a.y, m_y_layout, &m_heuristic.algo, m_workspace.data(), k_workspace_bytes,
                                      stream));
  }

 private:
  static constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;  // cuBLASLt's advice for Hopper
  DeviceBuffer<unsigned char> m_workspace;
  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_w_layout = nullptr, m_x_layout = nullptr, m_y_layout = nullptr;
  cublasLtMatmulPreference_t m_pref = nullptr;
  cublasLtMatmulHeuristicResult_t m_heuristic{};
};

// Its FLOPs run on the tensor cores: placed against the bf16 tensor rate, not the steps' FP32 one.
AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, CublasLt, .step = 0, .slug = "cublaslt",
                               .kind = VariantKind::vendor,
                               .summary = "cuBLASLt bf16 GEMM (m = batch), fp32 compute; bits=16 only",
                               .precision = "bf16");

}  // namespace aisp::ch19::weight_only_gemv::vendor
