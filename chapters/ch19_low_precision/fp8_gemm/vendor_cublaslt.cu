// ch19:fp8_gemm:vendor_cublaslt — cuBLASLt's FP8 GEMM with the same scaling: the reference the steps are
// measured by. Two entries:
// - vendor_cublaslt: the library's default, which promotes partial sums to fp32 as steps 06, 07 and 09-11 do
//   (CUBLASLT_MATMUL_DESC_FAST_ACCUM off); per-tensor scales as device pointers, block scales as
//   CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F (B, the weights) and VEC128_32F (A, the activations).
// - vendor_cublaslt_fast_accum: per-tensor only, FAST_ACCUM on: the accumulation stays in the tensor
//   cores for the whole K, the same arithmetic as steps 02-05 and 08 (the fair comparison for them).
// cuBLAS is column-major: C (row-major M x N) is computed as C^T = B * A^T, so cuBLAS's "A" is our B
// (used transposed: "TN", the only FP8 layout Hopper supports) and its "B" is our A; the scale pointers
// swap the same way. The plan is made once in setup(); a launch is the matmul alone.
// Run: aisp bench run --targets ch19:fp8_gemm:vendor_cublaslt
#include <cublasLt.h>

#include <string>

#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"

namespace aisp::ch19::fp8_gemm::vendor {

// A cuBLASLt status that means "this combination is not offered here" becomes SKIPPED; others throw.
inline void lt_check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    throw VariantUnavailable(std::string("cuBLASLt does not support this: ") + what);
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("ch19:fp8_gemm: ") + what + " failed: " + cublasLtGetStatusString(status));
  }
}
#define AISP_FP8_LT_CHECK(expr) lt_check((expr), #expr)

template <bool FastAccum>
class CublasLtFp8 {
 public:
  CublasLtFp8() = default;
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;
  ~CublasLtFp8() {
    if (m_pref) cublasLtMatmulPreferenceDestroy(m_pref);
    if (m_c_layout) cublasLtMatrixLayoutDestroy(m_c_layout);
    if (m_a_layout) cublasLtMatrixLayoutDestroy(m_a_layout);
    if (m_b_layout) cublasLtMatrixLayoutDestroy(m_b_layout);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  void setup(const Args& a, cudaStream_t) {
    if (FastAccum && a.scale_block != 0) {
      throw VariantUnavailable("fast accumulation is the per-tensor comparison for steps 02-05 and 08");
    }
    m_workspace = DeviceBuffer<unsigned char>(k_workspace_bytes);
    AISP_FP8_LT_CHECK(cublasLtCreate(&m_handle));
    AISP_FP8_LT_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    AISP_FP8_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    AISP_FP8_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    const std::int8_t fast = FastAccum ? 1 : 0;
    AISP_FP8_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    if (a.scale_block != 0) {
      const cublasLtMatmulMatrixScale_t weights = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      const cublasLtMatmulMatrixScale_t activations = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      AISP_FP8_LT_CHECK(
          cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &weights, sizeof weights));
      AISP_FP8_LT_CHECK(
          cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &activations, sizeof activations));
    }
    // The pointers are the problem's buffers, which keep their addresses across seeds (refilled in place).
    const void* sa = a.scale_b;  // cuBLAS's A is our B
    const void* sb = a.scale_a;
    AISP_FP8_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    AISP_FP8_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    AISP_FP8_LT_CHECK(cublasLtMatrixLayoutCreate(&m_a_layout, CUDA_R_8F_E4M3, a.k, a.n, a.k));  // our B
    AISP_FP8_LT_CHECK(cublasLtMatrixLayoutCreate(&m_b_layout, CUDA_R_8F_E4M3, a.k, a.m, a.k));  // our A
    AISP_FP8_LT_CHECK(cublasLtMatrixLayoutCreate(&m_c_layout, CUDA_R_16BF, a.n, a.m, a.n));
    AISP_FP8_LT_CHECK(cublasLtMatmulPreferenceCreate(&m_pref));
    const std::size_t ws = k_workspace_bytes;
    AISP_FP8_LT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(m_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    AISP_FP8_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_a_layout, m_b_layout, m_c_layout, m_c_layout,
                                                     m_pref, 1, &m_heuristic, &found));
    if (found == 0) throw VariantUnavailable("cuBLASLt has no algorithm for this FP8 GEMM and scaling");
  }

  void launch(const Args& a, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_FP8_LT_CHECK(cublasLtMatmul(m_handle, m_op, &one, a.b, m_a_layout, a.a, m_b_layout, &zero, a.c, m_c_layout,
                                     a.c, m_c_layout, &m_heuristic.algo, m_workspace.data(), k_workspace_bytes,
                                     stream));
  }

 private:
  static constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;
  DeviceBuffer<unsigned char> m_workspace;
  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_a_layout = nullptr, m_b_layout = nullptr, m_c_layout = nullptr;
  cublasLtMatmulPreference_t m_pref = nullptr;
  cublasLtMatmulHeuristicResult_t m_heuristic{};
};

namespace precise {
using Variant = CublasLtFp8<false>;
AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, Variant, .step = 0, .slug = "cublaslt", .kind = VariantKind::vendor,
                               .summary = "cuBLASLt FP8 e4m3 GEMM, same scaling (scalar or 128x128/1x128 blocks), "
                                          "fp32 promotion (fast accumulation off)");
}  // namespace precise

namespace fast {
using Variant = CublasLtFp8<true>;
AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, Variant, .step = 0, .slug = "cublaslt_fast_accum",
                               .kind = VariantKind::vendor,
                               .summary = "cuBLASLt FP8 e4m3 GEMM, per-tensor scales, fast accumulation (the "
                                          "arithmetic of steps 02-05 and 08)");
}  // namespace fast

}  // namespace aisp::ch19::fp8_gemm::vendor
