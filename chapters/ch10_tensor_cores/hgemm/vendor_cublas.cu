// ch10:hgemm:vendor_cublas — cuBLASLt's bf16 GEMM (fp32 compute, bf16 out): the reference every step is
// measured by.
//
// The plan (handle, layouts, the heuristic's first algorithm, 32 MiB workspace) is made once in setup(),
// so that a launch is the matmul alone. It is the same call as the problem's device reference
// (LtGemmTn in problem.hpp: C^T = B * A^T in cuBLAS's column-major terms).
// Run: aisp bench run --targets ch10:hgemm:vendor_cublas
#include <memory>

#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"

namespace aisp::ch10::hgemm::vendor {

class Cublas {
 public:
  void setup(const Args& a, cudaStream_t) { m_gemm = std::make_unique<LtGemmTn>(a.m, a.n, a.k); }
  void launch(const Args& a, cudaStream_t stream) { m_gemm->run(a.a, a.b, a.c, stream); }

 private:
  std::unique_ptr<LtGemmTn> m_gemm;
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, Cublas, .step = 0, .slug = "cublas", .kind = VariantKind::vendor,
                               .summary = "cuBLASLt bf16 GEMM, fp32 compute, heuristic's first algorithm");

}  // namespace aisp::ch10::hgemm::vendor
