// ch08:async_copy:01_sync_tiles — threads copy each tile into shared memory, wait, compute (the baseline).
//
// What: persistent blocks (one full wave at this shared memory) walk the tiles. The whole smem_kib is one
// tile (6136 outputs at 24 KiB, 51192 at 200 KiB). For each tile the 256 threads load its inputs with
// 16-byte loads and store them to shared memory, __syncthreads, compute the outputs from shared memory
// (three 16-byte shared loads per quad of outputs), __syncthreads, next tile. This is the textbook
// shared-memory stencil.
// Why it leaves time on the table: a load to shared memory through registers is synchronous for the
// thread: it issues the global load, waits the full DRAM latency, stores, and only then can the block
// compute. While a block computes and writes, it has no loads in flight. With 24 KiB, 8 blocks per SM
// take turns and cover each other; with 200 KiB the block is alone on its SM, and its loads (a few per
// thread in flight, as the compiler unrolls the copy loop) and its compute alternate instead of overlapping.
// Napkin math: 2.15 GB per launch at n = 2^28, ~0.5 ms at the DRAM copy ceiling. Alone on an SM, 256
// threads x ~4 loads x 16 B = 16 KiB in flight against ~20 KiB that latency x bandwidth asks of each SM,
// and none while computing: expect a clear loss to the asynchronous steps at 200 KiB, none at 24.
// Run: aisp bench run --targets ch08:async_copy:01_sync_tiles
#include "chapters/ch08_occupancy_pipelines/async_copy/problem.hpp"

namespace aisp::ch08::async_copy::v01 {

constexpr int k_stages = 1;

__global__ void __launch_bounds__(k_threads) stencil_sync_kernel(const float* __restrict__ in,
                                                                 float* __restrict__ out, std::size_t n,
                                                                 TileGeometry g) {
  extern __shared__ float4 smem[];  // g.load floats
  const std::size_t tiles = (n + g.tile - 1) / g.tile;
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const auto* src = reinterpret_cast<const float4*>(in + t * g.tile);
    for (int v = threadIdx.x; v < g.load / 4; v += k_threads) smem[v] = src[v];
    __syncthreads();
    stencil_tile(reinterpret_cast<const float*>(smem), out, t, g.tile, n);
    __syncthreads();  // every thread is done reading before the next tile overwrites the stage
  }
}

const void* kernel() { return reinterpret_cast<const void*>(&stencil_sync_kernel); }

void launch(const Args& a, cudaStream_t stream) {
  const TileGeometry g = tile_geometry(a.smem_bytes, k_stages);
  const int blocks = prepare_wave(a, kernel(), g.smem_bytes(k_stages));
  stencil_sync_kernel<<<blocks, k_threads, g.smem_bytes(k_stages), stream>>>(a.in, a.out, a.n, g);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) {
  return tile_facts(a, kernel(), tile_geometry(a.smem_bytes, k_stages), k_stages);
}

AISP_REGISTER_VARIANT_WITH_FACTS(AsyncCopyProblem, launch, facts, .step = 1, .slug = "sync_tiles",
                                 .kind = VariantKind::baseline,
                                 .summary = "threads load each tile to shared memory, sync, compute, sync");

}  // namespace aisp::ch08::async_copy::v01
