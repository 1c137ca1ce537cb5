// ch08:async_copy:03_tma_bulk — the TMA unit copies whole tiles; an mbarrier says when they landed.
//
// What changed: instead of 256 threads each issuing 16-byte cp.async pieces, one thread asks the SM's
// bulk-copy engine (TMA, new in Hopper) for the whole 8224-byte tile with one cp.async.bulk, and an
// mbarrier in shared memory counts the bytes as they arrive (expect_tx / complete_tx). Three stages:
// tiles t + 1 and t + 2 are in flight while tile t is computed. The threads wait on the barrier's phase
// instead of a __syncthreads after the copy.
// Why it should help: one instruction per tile instead of 514, no address arithmetic or issue slots spent
// on copies by the computing warps, and a deeper pipeline (2 tiles ahead instead of 1) for the same
// shared memory per SM as 8 blocks x 3 x 8 KiB = 197 KiB.
// Napkin math: the same 2.15 GB and the same DRAM copy ceiling; 132 x 8 x 2 x 8 KiB = 17 MB in flight.
// The copy itself was never the bottleneck of step 02's issue slots, so expect at most a few percent.
// Run: aisp bench run --targets ch08:async_copy:03_tma_bulk
// PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk" and "Parallel Synchronization and
// Communication Instructions: mbarrier" (mbarrier.init, mbarrier.arrive.expect_tx, mbarrier.try_wait.
// parity); CUDA C++ Programming Guide, "Asynchronous Data Copies using the Tensor Memory Accelerator".
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v03 {

constexpr int k_stages = 3;
constexpr unsigned k_tile_bytes = k_load * sizeof(float);  // 8224: a multiple of 16, as cp.async.bulk requires

// Tile t's outputs from its inputs in shared memory: thread quads q = threadIdx.x, + k_threads, ...;
// outputs 4q..4q+3 need s[4q .. 4q+11] (three 16-byte loads, 512 contiguous bytes per warp: no conflict).
__device__ void stencil_tile(const float* s, float* __restrict__ out, std::size_t t, std::size_t n) {
  for (int q = threadIdx.x; q < k_tile / 4; q += k_threads) {
    float v[12];
#pragma unroll
    for (int m = 0; m < 3; ++m) {
      const float4 f = reinterpret_cast<const float4*>(s)[q + m];
      v[4 * m] = f.x, v[4 * m + 1] = f.y, v[4 * m + 2] = f.z, v[4 * m + 3] = f.w;
    }
    constexpr StencilWeights w = stencil_weights();  // immediates in the FMAs
    float r[4];
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < k_points; ++k) acc = __fmaf_rn(w.w[k], v[o + k], acc);
      r[o] = acc;
    }
    const std::size_t i = t * k_tile + 4 * static_cast<std::size_t>(q);
    if (i + 4 <= n) {
      *reinterpret_cast<float4*>(out + i) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
      for (int o = 0; o < 4; ++o) {
        if (i + o < n) out[i + o] = r[o];
      }
    }
  }
}

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
__device__ inline void load_tile(float* stage, unsigned long long* full, const float* __restrict__ in,
                                 std::size_t t) {
  const unsigned bar = shared_address(full);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(k_tile_bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(stage)),
      "l"(in + t * k_tile), "r"(k_tile_bytes), "r"(bar)
      : "memory");
}

__global__ void __launch_bounds__(k_threads) stencil_tma_kernel(const float* __restrict__ in,
                                                                float* __restrict__ out, std::size_t n,
                                                                std::size_t tiles) {
  __shared__ __align__(128) float s[k_stages][k_load];
  __shared__ __align__(8) unsigned long long full[k_stages];
  const std::size_t mine = blockIdx.x < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto tile_of = [&](std::size_t k) { return blockIdx.x + k * gridDim.x; };

  if (threadIdx.x == 0) {
    for (int st = 0; st < k_stages; ++st) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[st])) : "memory");
    }
    // The barriers were initialised by ordinary stores; the copy engine (async proxy) must see them.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    for (std::size_t k = 0; k < mine && k < k_stages; ++k) load_tile(s[k], &full[k], in, tile_of(k));
  }
  __syncthreads();  // no thread waits on a barrier before it is initialised

  for (std::size_t k = 0; k < mine; ++k) {
    const int st = static_cast<int>(k % k_stages);
    wait_for_phase(shared_address(&full[st]), static_cast<unsigned>((k / k_stages) & 1));
    stencil_tile(s[st], out, tile_of(k), n);
    __syncthreads();  // every thread is done reading stage st before the engine refills it
    if (threadIdx.x == 0 && k + k_stages < mine) load_tile(s[st], &full[st], in, tile_of(k + k_stages));
  }
}

void launch(const Args& a, cudaStream_t stream) {
  stencil_tma_kernel<<<full_wave_blocks(a), k_threads, 0, stream>>>(a.in, a.out, a.n, a.tiles);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(AsyncCopyProblem, launch, .step = 3, .slug = "tma_bulk", .kind = VariantKind::optimized,
                      .summary = "TMA bulk copy per tile, mbarrier completion, 3 stages in flight",
                      .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch08::async_copy::v03
