// ch09:sgemm:08_double_buffer — two shared memory stages: the next tile loads while this one computes.
//
// What changed: step 07's warp tiling with BK = 16 and two stages of each tile in shared memory. At the top
// of each k-tile the block issues the global loads of the next tile into registers, runs the 16 x 64 FMAs
// per thread of the current one, then stores the registers to the other stage; one barrier per tile
// instead of two. The kernel (warptile_pipelined.cuh) is templated on the tiles and on an epilogue, so that
// ch09:fused_epilogue runs exactly this GEMM.
// Why it helps: in step 07 every warp waits at a barrier for the global loads of the tile (~1 us from L2 or
// DRAM) with nothing to do; its FMA pipe idles. Here the loads' latency is covered by a whole tile of FMAs,
// and the deeper BK halves the number of barriers per FMA again.
// Napkin math: 2 m n k = 137 GFLOP at 4096^3; at the FP32 FMA peak of the GPU (~61 TFLOP/s measured on an
// H200) that is 2.25 ms. cuBLAS's FP32 kernel gets ~84% of that peak; this step aims at >= 80% of cuBLAS.
// Tiles: 128 x 128 x 16 block tile, 64 x 32 warp tiles (8 warps), 2 blocks per SM (<= 128 registers).
// Run: aisp bench run --targets ch09:sgemm:08_double_buffer
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "chapters/ch09_intensity_fusion/sgemm/warptile_pipelined.cuh"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::sgemm::v08 {

using Tiles = WarpTile<128, 128, 16, 64, 32>;
constexpr int MIN_BLOCKS = 2;
constexpr auto kernel = &sgemm_pipelined_kernel<Tiles, MIN_BLOCKS, NoEpilogue>;

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(a.n / Tiles::BN, a.m / Tiles::BM);
  kernel<<<grid, Tiles::threads, 0, stream>>>(a.a, a.b, a.c, a.n, a.k, NoEpilogue{});
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(kernel), Tiles::threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(SgemmProblem, launch, facts, .step = 8, .slug = "double_buffer",
                                 .kind = VariantKind::step,
                                 .summary = "two smem stages, next tile's loads in flight during the FMAs");

}  // namespace aisp::ch09::sgemm::v08
