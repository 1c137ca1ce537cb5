// ch09:sgemm:09_tuned_tiles — the same kernel as step 08 with tile sizes picked per GPU by a measured sweep.
//
// What changed: nothing in the kernel. The tiles come from a table keyed by compute capability
// (with_tuned_tiles in warptile_pipelined.cuh). On sm_90 (H100/H200) a sweep over 20 block/warp tile
// shapes (README "Tuning") picked 128 x 128 x 8 block tiles with four 64 x 64 warp tiles: 8 x 16 outputs
// per thread instead of 8 x 8, at 4 warps per block instead of 8, and BK = 8 instead of 16.
// Why it helps: per k a thread now loads 2 + 4 float4s from shared memory for 128 FMAs instead of 2 + 2 for
// 64, so shared memory traffic and load issue per FMA fall by a third; the cost is ~220 registers per
// thread and 8 warps per SM (2 blocks of 4 warps), which the 128 independent accumulators per thread cover.
// The shallower BK halves the shared memory per block; at 4 warps per block the tile's loads are still
// 4 float4s per thread, and the sweep found BK = 8 ~1.5% ahead of 16.
// Napkin math: the FP32 FMA bound stays 2.25 ms at 4096^3 (~61 TFLOP/s measured peak on an H200); the gain
// is part of what step 08 loses to shared memory traffic. Other GPUs get step 08's tiles until measured.
// Run: aisp bench run --targets ch09:sgemm:09_tuned_tiles
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "chapters/ch09_intensity_fusion/sgemm/warptile_pipelined.cuh"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::sgemm::v09 {

void launch(const Args& a, cudaStream_t stream) {
  with_tuned_tiles(a.cc, [&](auto tiles, auto min_blocks) {
    using T = decltype(tiles);
    const dim3 grid(a.n / T::BN, a.m / T::BM);
    sgemm_pipelined_kernel<T, min_blocks(), NoEpilogue>
        <<<grid, T::threads, 0, stream>>>(a.a, a.b, a.c, a.n, a.k, NoEpilogue{});
    AISP_CHECK_LAUNCH();
  });
}

std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> out;
  with_tuned_tiles(a.cc, [&](auto tiles, auto min_blocks) {
    using T = decltype(tiles);
    out = standard_facts(kernel_facts(
        reinterpret_cast<const void*>(&sgemm_pipelined_kernel<T, min_blocks(), NoEpilogue>), T::threads));
    out.push_back({"tiles", std::to_string(T::BM) + "x" + std::to_string(T::BN) + "x" +
                                std::to_string(T::BK) + "/w" + std::to_string(T::WM) + "x" +
                                std::to_string(T::WN)});
  });
  return out;
}

AISP_REGISTER_VARIANT_WITH_FACTS(SgemmProblem, launch, facts, .step = 9, .slug = "tuned_tiles",
                                 .kind = VariantKind::optimized,
                                 .summary = "step 08's kernel with per-GPU tiles from a sweep (sm_90: 4 warps of 64x64)");

}  // namespace aisp::ch09::sgemm::v09
