// ch14:autotune:01_fixed_tile — the tiled GEMM with one tile shape for every problem: 128 x 128 x 8,
// 8 x 8 outputs per thread (axis `tile` can pick another, for the sweep of all six).
//
// What it is: the register-tiled kernel of tiled_sgemm.cuh at the tile the tutorials settle on, chosen
// once at build time, the way most hand-written GEMMs ship.
// Where it is right: large outputs. Each thread reuses every value it loads from shared memory 8 times,
// 16 FMAs per shared load, and m = n = 4096 makes 1,024 blocks, ~8 waves on an H100's 132 SMs.
// Where it is wrong: short or small outputs. m = 256, n = 4096 makes 2 x 32 = 64 blocks: half the SMs get
// no work at all, and those that do run one 256-thread block, too few warps to hide shared-memory and
// FMA latency. Napkin math: at best 64 / 132 of the GPU's FMA rate there, whatever the kernel's quality.
// Run: aisp bench run --targets ch14:autotune:01_fixed_tile
//      aisp bench run --targets ch14:autotune:01_fixed_tile --axis m=256 --axis tile=0,1,2,3,4,5
#include "chapters/ch14_compilers/autotune/problem.hpp"
#include "chapters/ch14_compilers/autotune/tiled_sgemm.cuh"
#include "device/kernel_facts.hpp"

namespace aisp::ch14::autotune::v01 {

void launch(const Args& a, cudaStream_t stream) { launch_tile(a.tile, a.a, a.b, a.c, a.m, a.n, a.k, stream); }

std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> out = {{"tile", k_tiles[static_cast<std::size_t>(a.tile)].name()}};
  for (auto& f : standard_facts(kernel_facts(tile_kernel(a.tile), k_tile_threads))) out.push_back(std::move(f));
  return out;
}

AISP_REGISTER_VARIANT_WITH_FACTS(AutotuneProblem, launch, facts, .step = 1, .slug = "fixed_tile",
                                 .kind = VariantKind::baseline,
                                 .summary = "tiled FP32 GEMM at one tile shape for every size (128x128x8, 8x8 per thread)");

}  // namespace aisp::ch14::autotune::v01
