// ch04 — R fp32 terms added element by element in rank order, ((t0 + t1) + t2) + ...: the order the host
// references add in, so a device reference built on it is bit-identical to them. The trusted references
// (allreduce, overlap) and the baselines' local sums (allreduce's staged host path, collectives'
// reduce-scatter by peer copies) all launch this one kernel. Included by .cu files only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/common/wave_grid.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch04 {

// The terms' pointers (any GPU's memory reachable from the launching one: its own or a peer's).
struct RankTerms {
  const float* term[k_max_ranks] = {};
};

// A template so that every .cu including this header may instantiate it (one kernel per translation
// unit, like any templated kernel); Threads is the block size the launch below uses.
template <int Threads>
__global__ void __launch_bounds__(Threads) rank_sum_kernel(RankTerms t, int ranks, float* __restrict__ out,
                                                           std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float sum = t.term[0][i];
    for (int r = 1; r < ranks; ++r) sum += t.term[r][i];
    out[i] = sum;
  }
}

// out[i] = the rank-order sum of t.term[0 .. ranks)[i] for i < n, on `stream` (of the GPU that is current
// and holds `out`); sm_count and max_threads_per_sm size the grid (wave_grid).
inline void launch_rank_sum(const RankTerms& t, int ranks, float* out, std::size_t n, int sm_count,
                            int max_threads_per_sm, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int threads = 256;
  rank_sum_kernel<threads>
      <<<wave_grid(sm_count, max_threads_per_sm, n, threads), threads, 0, stream>>>(t, ranks, out, n);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch04
