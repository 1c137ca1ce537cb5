// ch09:fused_epilogue:01_unfused — our best GEMM (ch09:sgemm:09_tuned_tiles), then bias + GELU as a
// separate kernel.
//
// The baseline of the fusion lesson: the same two-kernel structure as vendor_cublas, with our GEMM. The
// GEMM stores C, the epilogue kernel reads all of C back, and writes it again.
// Napkin math: the GEMM's time (ch09:sgemm:09_tuned_tiles at the same shape) plus 2 m n 4 bytes through
// DRAM (134 MB at 4096^2: ~30 us at ~4.4 TB/s) plus a launch: ~1-2% over the GEMM alone at 4096^3, much
// more for GEMMs with small k, where the GEMM itself is short.
// Run: aisp bench run --targets ch09:fused_epilogue:01_unfused
#include "chapters/ch09_intensity_fusion/fused_epilogue/problem.hpp"
#include "chapters/ch09_intensity_fusion/sgemm/warptile_pipelined.cuh"
#include "device/cuda_check.hpp"

namespace aisp::ch09::fused_epilogue::v01 {

void launch(const Args& a, cudaStream_t stream) {
  with_tuned_tiles(a.cc, [&](auto tiles, auto min_blocks) {
    using T = decltype(tiles);
    const dim3 grid(a.n / T::BN, a.m / T::BM);
    sgemm_pipelined_kernel<T, min_blocks(), NoEpilogue>
        <<<grid, T::threads, 0, stream>>>(a.a, a.b, a.c, a.n, a.k, NoEpilogue{});
    AISP_CHECK_LAUNCH();
  });
  launch_bias_gelu(a.c, a.bias, a.m, a.n, a.sm_count, a.max_threads_per_sm, stream);
}

AISP_REGISTER_VARIANT(FusedEpilogueProblem, launch, .step = 1, .slug = "unfused",
                      .kind = VariantKind::baseline,
                      .summary = "ch09:sgemm:09's GEMM, then a separate bias + GELU kernel over C");

}  // namespace aisp::ch09::fused_epilogue::v01
