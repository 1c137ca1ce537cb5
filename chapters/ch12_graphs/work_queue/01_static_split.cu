// ch12:work_queue:01_static_split — each block of a fixed grid takes a contiguous range of items, decided
// before the launch (the baseline).
//
// What: one full wave of blocks (SMs x resident blocks per SM, from the occupancy calculator), block b
// owning items [b * per_block, (b + 1) * per_block), per_block = ceil(items / blocks). A block processes
// its items one after another; for each, its 256 threads evaluate the feature of every element (four
// elements in flight per thread) and the block sums them (warp butterfly, then thread 0 over the 8 warps).
// It is the usual first version of "one fixed grid over all the work": every block gets the same number
// of items, which is the same amount of work only when the items are alike.
// Why it is slow on skewed work: the ranges hold the same count of items but very different amounts of
// work (item lengths are Pareto-distributed, 1,024 to 65,536 elements). The kernel ends when its most
// loaded block ends; SMs whose blocks finished early sit idle meanwhile.
// Napkin math: time ~ max over SMs of the work of its blocks, against the balanced bound of the total
// over all SMs (problem.hpp). On 132 SMs x 8 blocks the most loaded block holds 3.2x the mean block's
// work on the shuffled batch, 18x on a sorted one (cpu_test_work_queue.cpp); the SM's other blocks
// absorb part of it, and a fluid model of the SMs (a host simulation, not a measurement) predicts ~1.4x
// the balanced time shuffled, ~2.6x sorted (axis order=1 or 2).
// Run: aisp bench run --targets ch12:work_queue:01_static_split
#include <algorithm>

#include "chapters/ch12_graphs/work_queue/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::work_queue::v01 {

constexpr int k_warps = k_threads / 32;
constexpr int k_in_flight = 4;  // independent Horner chains per thread: FMA latency hidden within a warp

// reference.hpp feature_reference() for k_in_flight elements at once, the Horner chains interleaved
// by hand: each FMA waits ~4 cycles for its predecessor, so one chain per thread would leave the FMA
// pipe idle unless many warps stand by; four independent chains fill it from fewer warps.
__device__ void features(const float (&x)[k_in_flight], float (&y)[k_in_flight]) {
#pragma unroll
  for (int u = 0; u < k_in_flight; ++u) y[u] = coefficient(k_degree);
#pragma unroll
  for (int k = k_degree - 1; k >= 0; --k) {
#pragma unroll
    for (int u = 0; u < k_in_flight; ++u) y[u] = fmaf(y[u], x[u], coefficient(k));  // folded to immediates
  }
}

// One item, by the whole block: the summation order of reference.hpp (k_serial_adds). Ends with a
// barrier, so the block may start its next item at once.
__device__ void process_item(const float* __restrict__ x, const std::int32_t* __restrict__ offsets,
                             float* __restrict__ out, int item, float* warp_sums) {
  const std::int32_t begin = offsets[item], end = offsets[item + 1];
  float s = 0.0f;
  for (std::int32_t base = begin + static_cast<std::int32_t>(threadIdx.x); base < end;
       base += k_in_flight * k_threads) {
    float v[k_in_flight], f[k_in_flight];
#pragma unroll
    for (int u = 0; u < k_in_flight; ++u) {
      const std::int32_t j = base + u * k_threads;  // coalesced: a warp reads 32 consecutive floats
      v[u] = j < end ? x[j] : 0.0f;
    }
    features(v, f);
#pragma unroll
    for (int u = 0; u < k_in_flight; ++u) f[u] = base + u * k_threads < end ? f[u] : 0.0f;  // padding adds 0
#pragma unroll
    for (int u = 0; u < k_in_flight; ++u) s += f[u];
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = warp_sums[0];
#pragma unroll
    for (int w = 1; w < k_warps; ++w) total += warp_sums[w];
    out[item] = total;
  }
  __syncthreads();  // warp_sums is rewritten by the next item
}

__global__ void __launch_bounds__(k_threads) static_split_kernel(const float* __restrict__ x,
                                                                 const std::int32_t* __restrict__ offsets,
                                                                 float* __restrict__ out, int items) {
  __shared__ float warp_sums[k_warps];
  const int per_block = (items + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int first = static_cast<int>(blockIdx.x) * per_block;
  const int last = min(items, first + per_block);
  for (int item = first; item < last; ++item) process_item(x, offsets, out, item, warp_sums);
}

class StaticSplit {
 public:
  // The grid is one full wave: as many blocks as the SMs hold at once (the occupancy calculator knows
  // this kernel's registers), so that every block starts at once and the split is all that varies.
  void setup(const Args& a, cudaStream_t /*stream*/) {
    int per_sm = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, static_split_kernel, k_threads, 0));
    m_blocks = a.sm_count * std::max(per_sm, 1);
  }

  void launch(const Args& a, cudaStream_t stream) {
    static_split_kernel<<<m_blocks, k_threads, 0, stream>>>(a.x, a.offsets, a.out, a.items);
    AISP_CHECK_LAUNCH();
  }

  std::vector<Fact> facts(const Args& a) {
    return {{"blocks", std::to_string(m_blocks)},
            {"items_per_block", std::to_string((a.items + m_blocks - 1) / m_blocks)}};
  }

 private:
  int m_blocks = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(WorkQueueProblem, StaticSplit, .step = 1, .slug = "static_split",
                               .kind = VariantKind::baseline,
                               .summary = "one wave of blocks, each a fixed contiguous range of items");

}  // namespace aisp::ch12::work_queue::v01
