// ch09:fused_epilogue:vendor_cublaslt_epilogue — cuBLASLt FP32 GEMM with its own fused epilogue
// (CUBLASLT_EPILOGUE_GELU_BIAS: bias added per row of the column-major output, i.e. per column of our C,
// then GELU in the tanh form).
//
// The library's answer to the same fusion, for comparison with 02_fused.
// Run: aisp bench run --targets ch09:fused_epilogue:vendor_cublaslt_epilogue
#include "chapters/ch09_intensity_fusion/fused_epilogue/problem.hpp"

namespace aisp::ch09::fused_epilogue::vendor_lt {

class CublasLtEpilogue {
 public:
  void setup(const Args& a, cudaStream_t) { m_gemm.plan(a.m, a.n, a.k, LtSgemm::Epilogue::bias_gelu); }
  void launch(const Args& a, cudaStream_t stream) { m_gemm.run(a.a, a.b, a.c, stream, a.bias); }

 private:
  LtSgemm m_gemm;
};

AISP_REGISTER_STATEFUL_VARIANT(FusedEpilogueProblem, CublasLtEpilogue, .step = 0,
                               .slug = "cublaslt_epilogue", .kind = VariantKind::vendor,
                               .summary = "cuBLASLt FP32 GEMM with CUBLASLT_EPILOGUE_GELU_BIAS fused");

}  // namespace aisp::ch09::fused_epilogue::vendor_lt
