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
// GEMM (LtGemmTn, kernels/common/lt_gemm_tn.hpp, shared with ch10:hgemm and ch19:fp8_gemm).
// Run: aisp bench run --targets ch19:weight_only_gemv:vendor_cublaslt --axis bits=16
#include <memory>

#include "chapters/ch19_low_precision/weight_only_gemv/problem.hpp"
#include "kernels/common/lt_gemm_tn.hpp"

namespace aisp::ch19::weight_only_gemv::vendor {

class CublasLt {
 public:
  void setup(const Args& a, cudaStream_t) {
    if (a.bits != 16) throw VariantUnavailable("cuBLASLt has no weight-only int8/int4 GEMM");
    m_gemm = std::make_unique<LtGemmTn>(a.batch, a.n, a.k);  // y (batch x n) = x (batch x k) * W^T
  }
  void launch(const Args& a, cudaStream_t stream) { m_gemm->run(a.x, static_cast<const __nv_bfloat16*>(a.w), a.y, stream); }

 private:
  std::unique_ptr<LtGemmTn> m_gemm;
};

// Its FLOPs run on the tensor cores: placed against the bf16 tensor rate, not the steps' FP32 one.
AISP_REGISTER_STATEFUL_VARIANT(WeightOnlyGemvProblem, CublasLt, .step = 0, .slug = "cublaslt",
                               .kind = VariantKind::vendor,
                               .summary = "cuBLASLt bf16 GEMM (m = batch), fp32 compute; bits=16 only",
                               .precision = "bf16");

}  // namespace aisp::ch19::weight_only_gemv::vendor
