// ch08:async_copy:02_cp_async — cp.async double buffering: load the next tile while computing this one.
//
// What changed: the same shared memory as two half-size stages (a tile of 3064 outputs at 24 KiB, 25592
// at 200 KiB). Before computing tile t, the threads ask for tile t + gridDim.x with
// cp.async (a 16-byte global -> shared copy that does not pass through registers and does not block the
// thread), commit it as a group, and wait only for the group of tile t (cp.async.wait_group 1: all but
// the newest group done). The .cg form caches in L2 only: the data is used once, from shared memory.
// Why it helps: the load of the next tile is in flight during the compute and the stores of this one, so
// a block always has ~8 KiB outstanding instead of none half the time; DRAM latency is hidden by the
// block itself, not only by its neighbours on the SM.
// Napkin math: the same 2.15 GB. Every block keeps a whole stage in flight while it computes: at 24 KiB,
// 8 blocks x 12 KiB per SM, at 200 KiB one block with 100 KiB, several times the ~20 KiB per SM that
// latency x bandwidth needs: expect close to the DRAM copy ceiling at every smem_kib. Where 8 blocks per
// SM already hid the latency (24 KiB), the extra group bookkeeping per tile is all that changes.
// Run: aisp bench run --targets ch08:async_copy:02_cp_async
// PTX ISA: "Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group",
// "cp.async.wait_group"; CUDA C++ Programming Guide, "Asynchronous Data Copies".
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v02 {

constexpr int k_stages = 2;

// All of this thread's 16-byte pieces of tile t, global -> shared, without waiting for them.
__device__ void copy_tile_async(float* s, const float* __restrict__ in, std::size_t t, TileGeometry g) {
  const float* src = in + t * g.tile;
  for (int v = threadIdx.x; v < g.load / 4; v += k_threads) {
    const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(s + 4 * v));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 4 * v) : "memory");
  }
}

__global__ void __launch_bounds__(k_threads) stencil_cp_async_kernel(const float* __restrict__ in,
                                                                     float* __restrict__ out, std::size_t n,
                                                                     TileGeometry g) {
  extern __shared__ float4 smem[];  // k_stages stages of g.load floats
  float* const s0 = reinterpret_cast<float*>(smem);
  const auto stage = [&](int b) { return s0 + b * g.load; };  // not an array: no local memory
  const std::size_t tiles = (n + g.tile - 1) / g.tile;
  int buf = 0;
  if (blockIdx.x < tiles) copy_tile_async(stage(0), in, blockIdx.x, g);
  asm volatile("cp.async.commit_group;" ::: "memory");
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x, buf ^= 1) {
    if (t + gridDim.x < tiles) copy_tile_async(stage(buf ^ 1), in, t + gridDim.x, g);
    // Committed even when empty, so that "all but the newest group" always means "tile t".
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();  // every thread's pieces of tile t have landed
    stencil_tile(stage(buf), out, t, g.tile, n);
    __syncthreads();  // every thread is done reading stage(buf) before the next iteration refills it
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}

const void* kernel() { return reinterpret_cast<const void*>(&stencil_cp_async_kernel); }

void launch(const Args& a, cudaStream_t stream) {
  const TileGeometry g = tile_geometry(a.smem_bytes, k_stages);
  const int blocks = prepare_wave(a, kernel(), g.smem_bytes(k_stages));
  stencil_cp_async_kernel<<<blocks, k_threads, g.smem_bytes(k_stages), stream>>>(a.in, a.out, a.n, g);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) {
  return tile_facts(a, kernel(), tile_geometry(a.smem_bytes, k_stages), k_stages);
}

AISP_REGISTER_VARIANT_WITH_FACTS(AsyncCopyProblem, launch, facts, .step = 2, .slug = "cp_async",
                                 .kind = VariantKind::step,
                                 .summary = "cp.async double buffer: the next tile loads while this one computes",
                                 .min_cc = 80);

}  // namespace aisp::ch08::async_copy::v02
