// ch07:gather:01_thread_per_element — one thread per output element (the baseline).
//
// What: block rows walk the lookups in their (random) order; within a row each thread copies one 2-byte
// bf16 element per step, so a warp reads and writes 64 contiguous bytes of the row. This is how an
// elementwise habit writes an embedding lookup: coalesced, no index math per element beyond the row.
// Why it is slow: each thread has one 2-byte load in flight at a time (the table load waits on the index
// load before it). A full GPU then keeps about 132 SMs x 2048 threads x 2 B = 0.5 MB in flight, while
// hiding ~1 us of DRAM latency at ~4.4 TB/s needs ~4.4 MB (Little's law): the kernel is latency bound.
// Napkin math: 366 MB per launch at the defaults (ch07:gather problem.hpp); at 0.5 MB in flight per
// microsecond expect well under a quarter of the DRAM ceiling.
// Run: aisp bench run --targets ch07:gather:01_thread_per_element
#include <algorithm>

#include "chapters/ch07_memory_access/gather/problem.hpp"

namespace aisp::ch07::gather::v01 {

__global__ void gather_element_kernel(const __nv_bfloat16* __restrict__ table,
                                      const std::int32_t* __restrict__ idx, __nv_bfloat16* __restrict__ out,
                                      std::int64_t dim, std::int64_t lookups) {
  // blockIdx.x picks a 256-column slice of the row; blockIdx.y strides over the lookups.
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (std::int64_t l = blockIdx.y; l < lookups; l += gridDim.y) {
    out[l * dim + c] = table[static_cast<std::int64_t>(idx[l]) * dim + c];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  const int col_blocks = static_cast<int>((a.dim + threads - 1) / threads);
  // A full wave in total: as many rows of blocks at once as fit beside the column blocks.
  const int row_blocks = std::max(1, full_wave_blocks(a, threads) / col_blocks);
  const dim3 grid(col_blocks, static_cast<unsigned>(std::min<std::int64_t>(row_blocks, 65535)));
  gather_element_kernel<<<grid, threads, 0, stream>>>(a.table, a.indices, a.out, a.dim, a.lookups);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(GatherProblem, launch, .step = 1, .slug = "thread_per_element",
                      .kind = VariantKind::baseline,
                      .summary = "one thread per bf16 element, lookups in their random order");

}  // namespace aisp::ch07::gather::v01
