// ch01:launch_batching:01_one_call_each — one cublasGemmEx per product: the loop a first attempt writes.
//
// What it does: for i in 0 .. batch-1, C_i = A_i B with cublasGemmEx (bf16 in, fp32 out, fp32 compute,
// the default algorithm), every call on the harness's stream. Row-major X is column-major X^T for cuBLAS,
// so each call computes C_i^T (n x m) = B^T (n x k) A_i^T (k x m), with lda = k, ldb = ldc = n.
// Why it is slow: each product is a few hundred thousand FLOPs, microseconds of one SM. Every call pays
// the host side of cuBLAS (argument checks, algorithm choice, the kernel launch: a few microseconds) and
// the GPU runs the kernels one after another, each a handful of blocks on a GPU of 100+ SMs, with a
// launch gap between them.
// Napkin math: batch x (host cost per call ~3-5 us) against batch x (one small kernel ~2-4 us on the
// GPU): at 512 products, a couple of milliseconds, whichever side is slower; the FLOPs alone are
// ~1 us of a Hopper GPU's bf16 tensor cores.
// Run: aisp bench run --targets ch01:launch_batching:01_one_call_each
#include "chapters/ch01_goodput/launch_batching/cublas_handle.hpp"
#include "chapters/ch01_goodput/launch_batching/problem.hpp"

namespace aisp::ch01::launch_batching::v01 {

class OneCallEach {
 public:
  void setup(const Args&, cudaStream_t) { m_cublas.create(); }

  void launch(const Args& a, cudaStream_t stream) {
    cublasHandle_t h = m_cublas.on(stream);
    const float one = 1.0f, zero = 0.0f;
    const std::size_t a_step = static_cast<std::size_t>(a.m) * a.k, c_step = static_cast<std::size_t>(a.m) * a.n;
    for (int i = 0; i < a.batch; ++i) {
      AISP_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, a.n, a.m, a.k, &one, a.b, CUDA_R_16BF, a.n,
                                     a.a + i * a_step, CUDA_R_16BF, a.k, &zero, a.c + i * c_step, CUDA_R_32F,
                                     a.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }

 private:
  CublasHandle m_cublas;
};

AISP_REGISTER_STATEFUL_VARIANT(LaunchBatchingProblem, OneCallEach, .step = 1, .slug = "one_call_each",
                               .kind = VariantKind::baseline,
                               .summary = "one cublasGemmEx per product, batch calls in a host loop");

}  // namespace aisp::ch01::launch_batching::v01
