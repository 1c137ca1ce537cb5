// ch07:gather:02_warp_per_row — one warp per looked-up row, 16-byte vectors, several in flight.
//
// What changed: a warp owns a whole lookup: it reads the index once and moves the row as 16-byte vectors
// (8 bf16 each), each lane issuing four vector loads before the four stores. Warps stride over the
// lookups; the grid is one full wave.
// Why it helps: the bytes in flight per thread go from 2 to 64 (four independent 16-byte loads), so the
// same threads now keep ~17 MB in flight, far more than the ~4.4 MB that DRAM latency x bandwidth needs.
// Rows that repeat are still read once per lookup, but a popular row is in L2 after its first read.
// Napkin math: 366 MB at the defaults; expect close to the DRAM ceiling (ch07:copy's vectorized step
// reaches ~93% of cudaMemcpyAsync).
// Run: aisp bench run --targets ch07:gather:02_warp_per_row
#include "chapters/ch07_memory_access/gather/problem.hpp"

namespace aisp::ch07::gather::v02 {

constexpr int k_unroll = 4;  // 16-byte vectors each lane loads before it stores

__global__ void gather_warp_row_kernel(const __nv_bfloat16* __restrict__ table,
                                       const std::int32_t* __restrict__ idx, __nv_bfloat16* __restrict__ out,
                                       std::int64_t dim, std::int64_t lookups) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  const std::int64_t vecs = dim / 8;  // dim % 8 == 0 (problem.hpp), and rows start 16-byte aligned
  for (std::int64_t l = warp; l < lookups; l += warps) {
    const auto* src = reinterpret_cast<const uint4*>(table + static_cast<std::int64_t>(idx[l]) * dim);
    auto* dst = reinterpret_cast<uint4*>(out + l * dim);
    for (std::int64_t v = lane; v < vecs; v += 32 * k_unroll) {
      uint4 r[k_unroll] = {};
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) {
        if (v + 32 * u < vecs) r[u] = src[v + 32 * u];
      }
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) {
        if (v + 32 * u < vecs) dst[v + 32 * u] = r[u];
      }
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  gather_warp_row_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.table, a.indices, a.out,
                                                                               a.dim, a.lookups);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(GatherProblem, launch, .step = 2, .slug = "warp_per_row", .kind = VariantKind::step,
                      .summary = "one warp per lookup, 16-byte vectors, four loads in flight per lane");

}  // namespace aisp::ch07::gather::v02
