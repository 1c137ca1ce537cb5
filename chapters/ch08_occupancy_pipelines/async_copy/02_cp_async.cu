// ch08:async_copy:02_cp_async — cp.async double buffering: load the next tile while computing this one.
//
// What changed: two shared buffers. Before computing tile t, the threads ask for tile t + gridDim.x with
// cp.async (a 16-byte global -> shared copy that does not pass through registers and does not block the
// thread), commit it as a group, and wait only for the group of tile t (cp.async.wait_group 1: all but
// the newest group done). The .cg form caches in L2 only: the data is used once, from shared memory.
// Why it helps: the load of the next tile is in flight during the compute and the stores of this one, so
// a block always has ~8 KiB outstanding instead of none half the time; DRAM latency is hidden by the
// block itself, not only by its neighbours on the SM.
// Napkin math: the same 2.15 GB; with every block keeping a tile in flight, 132 x 8 x 8 KiB = 8.7 MB are
// outstanding, about twice what latency x bandwidth needs: expect close to the DRAM copy ceiling.
// Run: aisp bench run --targets ch08:async_copy:02_cp_async
// PTX ISA: "Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group",
// "cp.async.wait_group"; CUDA C++ Programming Guide, "Asynchronous Data Copies".
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v02 {

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

// All of this thread's 16-byte pieces of tile t, global -> shared, without waiting for them.
__device__ void copy_tile_async(float* s, const float* __restrict__ in, std::size_t t) {
  const float* src = in + t * k_tile;
  for (int v = threadIdx.x; v < k_load / 4; v += k_threads) {
    const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(s + 4 * v));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 4 * v) : "memory");
  }
}

__global__ void __launch_bounds__(k_threads) stencil_cp_async_kernel(const float* __restrict__ in,
                                                                     float* __restrict__ out, std::size_t n,
                                                                     std::size_t tiles) {
  __shared__ __align__(16) float s[2][k_load];
  int buf = 0;
  if (blockIdx.x < tiles) copy_tile_async(s[0], in, blockIdx.x);
  asm volatile("cp.async.commit_group;" ::: "memory");
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x, buf ^= 1) {
    if (t + gridDim.x < tiles) copy_tile_async(s[buf ^ 1], in, t + gridDim.x);
    // Committed even when empty, so that "all but the newest group" always means "tile t".
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();  // every thread's pieces of tile t have landed
    stencil_tile(s[buf], out, t, n);
    __syncthreads();  // every thread is done reading s[buf] before the next iteration refills it
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}

void launch(const Args& a, cudaStream_t stream) {
  stencil_cp_async_kernel<<<full_wave_blocks(a), k_threads, 0, stream>>>(a.in, a.out, a.n, a.tiles);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(AsyncCopyProblem, launch, .step = 2, .slug = "cp_async", .kind = VariantKind::step,
                      .summary = "cp.async double buffer: the next tile loads while this one computes",
                      .min_cc = 80);

}  // namespace aisp::ch08::async_copy::v02
