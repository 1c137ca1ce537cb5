// ch09:fused_epilogue:vendor_cublas — cuBLASLt FP32 GEMM, then bias + GELU as a separate kernel.
//
// The way a framework runs a Linear + GELU without fusion: the GEMM writes C, a second kernel reads it back,
// applies the epilogue and writes it again. At 4096^2 that is 134 MB more DRAM traffic (~30 us at
// ~4.4 TB/s) and one more launch on top of the GEMM.
// Run: aisp bench run --targets ch09:fused_epilogue:vendor_cublas
#include "chapters/ch09_intensity_fusion/fused_epilogue/problem.hpp"

namespace aisp::ch09::fused_epilogue::vendor {

class CublasThenGelu {
 public:
  void setup(const Args& a, cudaStream_t) { m_gemm.plan(a.m, a.n, a.k); }
  void launch(const Args& a, cudaStream_t stream) {
    m_gemm.run(a.a, a.b, a.c, stream);
    launch_bias_gelu(a.c, a.bias, a.m, a.n, a.sm_count, a.max_threads_per_sm, stream);
  }

 private:
  LtSgemm m_gemm;
};

AISP_REGISTER_STATEFUL_VARIANT(FusedEpilogueProblem, CublasThenGelu, .step = 0, .slug = "cublas",
                               .kind = VariantKind::vendor,
                               .summary = "cuBLASLt FP32 GEMM, then a separate bias + GELU kernel");

}  // namespace aisp::ch09::fused_epilogue::vendor
