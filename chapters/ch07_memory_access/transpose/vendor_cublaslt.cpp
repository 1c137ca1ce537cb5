// ch07:transpose:vendor_cublaslt — cuBLASLt's matrix transform with op(A) = A^T: the library reference.
//
// cublasLtMatrixTransform computes C = alpha * op(A) + beta * op(B); with alpha = 1, beta = 0 and no B it
// is a plain out-of-place transpose. The layouts are declared row-major (CUBLASLT_ORDER_ROW), so no
// column-major bookkeeping is needed: A is rows x cols, C is cols x rows. The handle and the descriptors
// are made once in setup, outside the timed launches. Host-only code, hence a .cpp (see CMakeLists.txt).
// Run: aisp bench run --targets ch07:transpose:vendor_cublaslt
#include <cublasLt.h>

#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::transpose::vendor {

class CublasLtTranspose {
 public:
  CublasLtTranspose() = default;
  CublasLtTranspose(const CublasLtTranspose&) = delete;
  CublasLtTranspose& operator=(const CublasLtTranspose&) = delete;
  ~CublasLtTranspose() {
    // Errors on release are ignored: there is nothing left to report them to.
    if (m_c) cublasLtMatrixLayoutDestroy(m_c);
    if (m_a) cublasLtMatrixLayoutDestroy(m_a);
    if (m_desc) cublasLtMatrixTransformDescDestroy(m_desc);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  void setup(const Args& a, cudaStream_t) {
    AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
    AISP_CUBLAS_CHECK(cublasLtMatrixTransformDescCreate(&m_desc, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    AISP_CUBLAS_CHECK(cublasLtMatrixTransformDescSetAttribute(m_desc, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA,
                                                              &transpose, sizeof(transpose)));
    m_a = row_major_layout(a.rows, a.cols);
    m_c = row_major_layout(a.cols, a.rows);
  }

  void launch(const Args& a, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_CUBLAS_CHECK(cublasLtMatrixTransform(m_handle, m_desc, &one, a.in, m_a, &zero, nullptr, nullptr, a.out,
                                              m_c, stream));
  }

 private:
  static cublasLtMatrixLayout_t row_major_layout(std::size_t rows, std::size_t cols) {
    cublasLtMatrixLayout_t layout = nullptr;
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, rows, cols, static_cast<std::int64_t>(cols)));
    const cublasLtOrder_t order = CUBLASLT_ORDER_ROW;
    AISP_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
    return layout;
  }

  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatrixTransformDesc_t m_desc = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr;
  cublasLtMatrixLayout_t m_c = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(TransposeProblem, CublasLtTranspose, .step = 0, .slug = "cublaslt",
                               .kind = VariantKind::vendor,
                               .summary = "cublasLtMatrixTransform with op(A) = A^T (row-major layouts)");

}  // namespace aisp::ch07::transpose::vendor
