// ch09:sgemm:vendor_cublas — cuBLASLt FP32 GEMM (CUBLAS_COMPUTE_32F: no TF32), the reference every step is
// measured by.
//
// The handle, the plan and the 32 MiB workspace are made in setup(), outside the timed launches; launch()
// is one cublasLtMatmul on the harness stream. See common/lt_sgemm.hpp for the row-major mapping.
// Run: aisp bench run --targets ch09:sgemm:vendor_cublas
#include "chapters/ch09_intensity_fusion/common/lt_sgemm.hpp"
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"

namespace aisp::ch09::sgemm::vendor {

class Cublas {
 public:
  void setup(const Args& a, cudaStream_t) { m_gemm.plan(a.m, a.n, a.k); }
  void launch(const Args& a, cudaStream_t stream) { m_gemm.run(a.a, a.b, a.c, stream); }

 private:
  LtSgemm m_gemm;
};

AISP_REGISTER_STATEFUL_VARIANT(SgemmProblem, Cublas, .step = 0, .slug = "cublas", .kind = VariantKind::vendor,
                               .summary = "cuBLASLt FP32 GEMM, CUBLAS_COMPUTE_32F (no TF32)");

}  // namespace aisp::ch09::sgemm::vendor
