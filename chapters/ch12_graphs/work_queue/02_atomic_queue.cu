// ch12:work_queue:02_atomic_queue — persistent blocks take the next item from an atomic counter.
//
// What changed: the static range is gone. The same grid of blocks (one full wave) loops: thread 0 takes
// the next item with atomicAdd(counter, 1), shares it through shared memory, and the block processes it
// with step 01's code (same features, same summation order, so the same output bits) until the counter
// passes the last item. The counter is zeroed with a 4-byte cudaMemsetAsync on the stream before each
// kernel, inside the launch: every launch starts its queue from item 0.
// Why it helps: a block that finishes early takes more items instead of idling, so every SM stays busy
// until the queue runs dry; what remains uneven is at most about one item per block at the very end
// (the longest item is 65,536 elements, a few % of an SM's share at the default size).
// What it costs: one atomic per item on one address (16,384 of them, far below the rate at which an
// L2 slice serializes them, see ch07:reduction) and a barrier per item to publish the index; the
// atomic's round trip is hidden by the other blocks on the SM.
// Napkin math: close to the balanced bound (problem.hpp), whatever the order of the items.
// Run: aisp bench run --targets ch12:work_queue:02_atomic_queue
#include <algorithm>

#include "chapters/ch12_graphs/work_queue/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::work_queue::v02 {

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

// Persistent: each block runs until the queue is empty. `next` must be 0 when the kernel starts.
__global__ void __launch_bounds__(k_threads) atomic_queue_kernel(const float* __restrict__ x,
                                                                 const std::int32_t* __restrict__ offsets,
                                                                 float* __restrict__ out, int items, int* next) {
  __shared__ float warp_sums[k_warps];
  __shared__ int taken;
  for (;;) {
    if (threadIdx.x == 0) taken = atomicAdd(next, 1);
    __syncthreads();
    // Every thread reads `taken` before process_item's barriers, so thread 0 cannot overwrite it early.
    const int item = taken;
    if (item >= items) break;  // the same value for the whole block: it leaves together
    process_item(x, offsets, out, item, warp_sums);
  }
}

class AtomicQueue {
 public:
  AtomicQueue() = default;
  AtomicQueue(const AtomicQueue&) = delete;
  AtomicQueue& operator=(const AtomicQueue&) = delete;

  // Step 01's grid (one full wave) and the queue's counter, allocated once.
  void setup(const Args& a, cudaStream_t /*stream*/) {
    int per_sm = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, atomic_queue_kernel, k_threads, 0));
    m_blocks = a.sm_count * std::max(per_sm, 1);
    m_next = DeviceBuffer<int>(1);
  }

  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUDA_CHECK(cudaMemsetAsync(m_next.data(), 0, sizeof(int), stream));
    atomic_queue_kernel<<<m_blocks, k_threads, 0, stream>>>(a.x, a.offsets, a.out, a.items, m_next.data());
    AISP_CHECK_LAUNCH();
  }

  std::vector<Fact> facts(const Args& /*a*/) { return {{"blocks", std::to_string(m_blocks)}}; }

 private:
  int m_blocks = 0;
  DeviceBuffer<int> m_next;
};

AISP_REGISTER_STATEFUL_VARIANT(WorkQueueProblem, AtomicQueue, .step = 2, .slug = "atomic_queue",
                               .kind = VariantKind::optimized,
                               .summary = "one wave of persistent blocks, each taking the next item from an "
                                          "atomic counter");

}  // namespace aisp::ch12::work_queue::v02
