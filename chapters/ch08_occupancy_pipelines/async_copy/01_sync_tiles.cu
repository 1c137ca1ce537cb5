// ch08:async_copy:01_sync_tiles — threads copy each tile into shared memory, wait, compute (the baseline).
//
// What: persistent blocks (one full wave) walk the tiles. For each tile the 256 threads load its 2056
// inputs with 16-byte loads and store them to shared memory, __syncthreads, compute 2048 outputs from
// shared memory (each thread two quads, three 16-byte shared loads per quad), __syncthreads, next tile.
// This is the textbook shared-memory stencil.
// Why it leaves time on the table: a load to shared memory through registers is synchronous for the
// thread: it issues the global load, waits the full DRAM latency, stores, and only then can the block
// compute. While a block computes and writes, it has no loads in flight; the SM's other blocks cover
// some of that, but each SM holds only 8 blocks x 8 KiB = 64 KiB of outstanding loads at best.
// Napkin math: 2.15 GB per launch at n = 2^28, ~0.5 ms at the DRAM copy ceiling; the exposed latency per
// tile (~1 us per 8 KiB per block) caps a block at ~8 GB/s x 1056 blocks, so expect well under it.
// Run: aisp bench run --targets ch08:async_copy:01_sync_tiles
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v01 {

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

__global__ void __launch_bounds__(k_threads) stencil_sync_kernel(const float* __restrict__ in,
                                                                 float* __restrict__ out, std::size_t n,
                                                                 std::size_t tiles) {
  __shared__ __align__(16) float s[k_load];
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const auto* src = reinterpret_cast<const float4*>(in + t * k_tile);
    for (int v = threadIdx.x; v < k_load / 4; v += k_threads) reinterpret_cast<float4*>(s)[v] = src[v];
    __syncthreads();
    stencil_tile(s, out, t, n);
    __syncthreads();  // every thread is done reading before the next tile overwrites s
  }
}

void launch(const Args& a, cudaStream_t stream) {
  stencil_sync_kernel<<<full_wave_blocks(a), k_threads, 0, stream>>>(a.in, a.out, a.n, a.tiles);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(AsyncCopyProblem, launch, .step = 1, .slug = "sync_tiles", .kind = VariantKind::baseline,
                      .summary = "threads load each tile to shared memory, sync, compute, sync");

}  // namespace aisp::ch08::async_copy::v01
