// ch08:async_copy:03_tma_bulk — the TMA unit copies whole tiles; an mbarrier says when they landed.
//
// What changed: instead of 256 threads each issuing 16-byte cp.async pieces, one thread asks the SM's
// bulk-copy engine (TMA, new in Hopper) for a whole tile with one cp.async.bulk, and an mbarrier in shared
// memory counts the bytes as they arrive (expect_tx / complete_tx). The same shared memory as the other
// steps, as three stages (a tile of 2040 outputs at 24 KiB, 17056 at 200 KiB): tiles t + 1 and t + 2 are
// in flight while tile t is computed. The threads wait on the barrier's phase instead of a
// __syncthreads after the copy.
// Why it should help: one instruction per tile instead of hundreds, no address arithmetic or issue slots
// spent on copies by the computing warps, and a deeper pipeline (2 tiles ahead instead of 1).
// Napkin math: the same 2.15 GB and the same DRAM copy ceiling; two thirds of the block's shared memory
// in flight while it computes (133 KiB per SM at 200 KiB). The copy itself was never the bottleneck of
// step 02's issue slots, so expect at most a few percent over it; over step 01 it should win where a
// block is alone on its SM (200 KiB), and tie or lose where 8 blocks share one (24 KiB).
// Run: aisp bench run --targets ch08:async_copy:03_tma_bulk
// PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk" and "Parallel Synchronization and
// Communication Instructions: mbarrier" (mbarrier.init, mbarrier.arrive.expect_tx, mbarrier.try_wait.
// parity); CUDA C++ Programming Guide, "Asynchronous Data Copies using the Tensor Memory Accelerator".
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v03 {

constexpr int k_stages = 3;

__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Spins until the barrier has completed the phase of this parity (the k-th use of a stage is phase k).
__device__ inline void wait_for_phase(unsigned barrier, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (!done);
}

// One thread: announce the bytes to the stage's barrier, then ask the engine for the whole tile.
// g.load * 4 bytes: a multiple of 128 (tile_geometry), so of 16 as cp.async.bulk requires, and far under
// the mbarrier's transaction-count limit (2^20 - 1 bytes per phase).
__device__ inline void load_tile(float* stage, unsigned long long* full, const float* __restrict__ in,
                                 std::size_t t, TileGeometry g) {
  const unsigned bar = shared_address(full);
  const unsigned bytes = static_cast<unsigned>(g.load) * sizeof(float);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(stage)),
      "l"(in + t * g.tile), "r"(bytes), "r"(bar)
      : "memory");
}

__global__ void __launch_bounds__(k_threads) stencil_tma_kernel(const float* __restrict__ in,
                                                                float* __restrict__ out, std::size_t n,
                                                                TileGeometry g) {
  extern __shared__ float4 smem[];  // k_stages stages of g.load floats
  __shared__ __align__(8) unsigned long long full[k_stages];
  float* const s0 = reinterpret_cast<float*>(smem);
  const auto stage = [&](int st) { return s0 + st * g.load; };
  const std::size_t tiles = (n + g.tile - 1) / g.tile;
  const std::size_t mine = blockIdx.x < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto tile_of = [&](std::size_t k) { return blockIdx.x + k * gridDim.x; };

  if (threadIdx.x == 0) {
    for (int st = 0; st < k_stages; ++st) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[st])) : "memory");
    }
    // The barriers were initialised by ordinary stores; the copy engine (async proxy) must see them.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    for (std::size_t k = 0; k < mine && k < k_stages; ++k) load_tile(stage(static_cast<int>(k)), &full[k], in, tile_of(k), g);
  }
  __syncthreads();  // no thread waits on a barrier before it is initialised

  for (std::size_t k = 0; k < mine; ++k) {
    const int st = static_cast<int>(k % k_stages);
    wait_for_phase(shared_address(&full[st]), static_cast<unsigned>((k / k_stages) & 1));
    stencil_tile(stage(st), out, tile_of(k), g.tile, n);
    __syncthreads();  // every thread is done reading stage st before the engine refills it
    if (threadIdx.x == 0 && k + k_stages < mine) load_tile(stage(st), &full[st], in, tile_of(k + k_stages), g);
  }
}

const void* kernel() { return reinterpret_cast<const void*>(&stencil_tma_kernel); }

void launch(const Args& a, cudaStream_t stream) {
  const TileGeometry g = tile_geometry(a.smem_bytes, k_stages);
  const int blocks = prepare_wave(a, kernel(), g.smem_bytes(k_stages));
  stencil_tma_kernel<<<blocks, k_threads, g.smem_bytes(k_stages), stream>>>(a.in, a.out, a.n, g);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) {
  return tile_facts(a, kernel(), tile_geometry(a.smem_bytes, k_stages), k_stages);
}

AISP_REGISTER_VARIANT_WITH_FACTS(AsyncCopyProblem, launch, facts, .step = 3, .slug = "tma_bulk",
                                 .kind = VariantKind::optimized,
                                 .summary = "TMA bulk copy per tile, mbarrier completion, 3 stages in flight",
                                 .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch08::async_copy::v03
