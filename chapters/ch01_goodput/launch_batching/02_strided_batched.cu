// ch01:launch_batching:02_strided_batched — the whole batch in one cublasGemmStridedBatchedEx call.
//
// What changed: the host loop over products is gone. One call describes the batch by its strides:
// A_i at A + i * m * k, C_i at C + i * m * n, and B at stride 0 (the same B for every product: cuBLAS
// reads it again for each item). Same types, same compute type, same default algorithm as step 01.
// Why it helps: one host call instead of `batch`, and cuBLAS launches a kernel whose grid covers every
// product at once (the batch index is a grid dimension), so the tiles of all products fill the SMs
// together instead of a few blocks per launch, one launch after another.
// What it leaves: each product is still its own small GEMM; with m = n = 64 a tile covers a whole product
// and the kernel is chosen for a 64 x 64 x 64 problem, not for the batch's total size.
// Napkin math: one host call (~5 us) and one kernel over batch x (tiles per product) blocks: at 512
// products of 64^3 the data (12.6 MB) fits in L2 and the FLOPs are ~1 us of tensor-core time, so expect
// the launch and the kernel's ramp to dominate, tens of microseconds at most.
// Run: aisp bench run --targets ch01:launch_batching:02_strided_batched
#include "chapters/ch01_goodput/launch_batching/cublas_handle.hpp"
#include "chapters/ch01_goodput/launch_batching/problem.hpp"

namespace aisp::ch01::launch_batching::v02 {

class StridedBatched {
 public:
  void setup(const Args&, cudaStream_t) { m_cublas.create(); }

  void launch(const Args& a, cudaStream_t stream) {
    cublasHandle_t h = m_cublas.on(stream);
    const float one = 1.0f, zero = 0.0f;
    const long long a_step = static_cast<long long>(a.m) * a.k, c_step = static_cast<long long>(a.m) * a.n;
    // cuBLAS's first operand is our B (stride 0: shared by every item), its second our A_i.
    AISP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, a.n, a.m, a.k, &one, a.b,
                                                 CUDA_R_16BF, a.n, 0, a.a, CUDA_R_16BF, a.k, a_step,
                                                 &zero, a.c, CUDA_R_32F, a.n, c_step, a.batch,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  CublasHandle m_cublas;
};

AISP_REGISTER_STATEFUL_VARIANT(LaunchBatchingProblem, StridedBatched, .step = 2, .slug = "strided_batched",
                               .kind = VariantKind::step,
                               .summary = "one cublasGemmStridedBatchedEx call for the batch (B at stride 0)");

}  // namespace aisp::ch01::launch_batching::v02
