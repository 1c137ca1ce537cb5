// ch01:launch_batching:03_one_tall_gemm — the batch as ONE GEMM: the stacked A's times the shared B.
//
// What changed: no batch at all. The A_i are stacked rows of one (batch * m) x k matrix and every product
// uses the same B, so [A_0; A_1; ...; A_{batch-1}] B = [C_0; C_1; ...] is one ordinary GEMM whose result
// lands exactly where the C_i must be (can_stack_into_one_gemm in reference.hpp is the rule: one shared
// B, A's and C's densely stacked; a different B per item makes the batch block-diagonal and this step
// illegal). In cuBLAS's column-major terms: C^T (n x batch*m) = B^T (n x k) A^T (k x batch*m).
// Why it helps: cuBLAS now sees a 32768 x 64 x 64 problem (at the defaults) instead of 512 problems of
// 64 x 64 x 64: it picks tiles and a kernel for the total size, B is loaded once per tile instead of
// once per item, and the batch index disappears from the kernel. It is also one call.
// Napkin math: the same one host call as step 02; a single GEMM over 12.6 MB in L2 and 0.27 GFLOP.
// Expect step 02's time or a little less: both are one launch, and what remains is cuBLAS's kernel
// choice for a tall skinny product against a batch of tiny ones.
// Run: aisp bench run --targets ch01:launch_batching:03_one_tall_gemm
#include "chapters/ch01_goodput/launch_batching/cublas_handle.hpp"
#include "chapters/ch01_goodput/launch_batching/problem.hpp"

namespace aisp::ch01::launch_batching::v03 {

class OneTallGemm {
 public:
  void setup(const Args& a, cudaStream_t) {
    // The problem allocates exactly this layout; the check keeps the step honest if that ever changes.
    if (!can_stack_into_one_gemm(problem_layout(a.m, a.n, a.k))) {
      throw DataError("ch01:launch_batching:03_one_tall_gemm: the batch's layout cannot be stacked into one GEMM");
    }
    m_cublas.create();
  }

  void launch(const Args& a, cudaStream_t stream) {
    cublasHandle_t h = m_cublas.on(stream);
    const float one = 1.0f, zero = 0.0f;
    const int rows = a.batch * a.m;  // fits an int: the problem checks it
    AISP_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, a.n, rows, a.k, &one, a.b, CUDA_R_16BF, a.n, a.a,
                                   CUDA_R_16BF, a.k, &zero, a.c, CUDA_R_32F, a.n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  }

 private:
  CublasHandle m_cublas;
};

AISP_REGISTER_STATEFUL_VARIANT(LaunchBatchingProblem, OneTallGemm, .step = 3, .slug = "one_tall_gemm",
                               .kind = VariantKind::optimized,
                               .summary = "one cublasGemmEx of the stacked (batch*m) x k A by the shared B");

}  // namespace aisp::ch01::launch_batching::v03
