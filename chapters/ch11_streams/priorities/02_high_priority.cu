// ch11:priorities:02_high_priority — the same streams and kernels, but the critical stream is created with
// the device's greatest priority.
//
// What changed: one call in setup(). The critical stream comes from cudaStreamCreateWithPriority with the
// greatest priority cudaDeviceGetStreamPriorityRange reports (numerically the lowest; 0 is the default
// and the least); the bulk stream keeps the default. Kernels, grids, issue order and the fork/join are
// step 01's.
// Why it helps: the block scheduler hands out pending blocks of higher-priority grids first. It does not
// stop running blocks (priority is not preemption of a running block), but the copy's blocks are short
// (2^18 of them retire over ~0.55 ms: one every few nanoseconds somewhere on the GPU), so each chain
// kernel's one block takes the next free slot instead of waiting for the copy's last wave. The chain then
// runs inside the copy's time, one slot at a time, and takes from the copy only the slots it occupies.
// Napkin math (defaults): the makespan falls from copy + chain toward the longer of the two, ~0.55 ms of
// DRAM copy on an H200, as long as the chain (which now shares its SM with copy blocks) is shorter. The
// declared floor is the copy at the DRAM copy ceiling, so % of ceiling reads how much of the chain is hidden.
// Run: aisp bench run --targets ch11:priorities:02_high_priority
#include <array>

#include "chapters/ch11_streams/priorities/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::priorities::v02 {

constexpr int k_threads = 256;
constexpr int k_per_thread = 4;  // independent loads in flight per thread
constexpr int k_block_elems = k_threads * k_per_thread;

// Step 01's kernels, unchanged. Short blocks on purpose: each copies 4 KiB and retires, so slots free up
// all the time. That is what gives the scheduler the choice this ladder is about (a grid of persistent
// blocks would never free one).
__global__ void bulk_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, std::size_t n) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * k_block_elems + threadIdx.x;
  float v[k_per_thread];
#pragma unroll
  for (int j = 0; j < k_per_thread; ++j) {
    const std::size_t i = base + static_cast<std::size_t>(j) * k_threads;
    v[j] = i < n ? src[i] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < k_per_thread; ++j) {
    const std::size_t i = base + static_cast<std::size_t>(j) * k_threads;
    if (i < n) dst[i] = v[j];
  }
}

// One step of the chain: p(x) by Horner's rule, written (first step) or added to the state.
__global__ void critical_step_kernel(const float* __restrict__ x, float* __restrict__ state, int fmas, bool first) {
  const float v = x[threadIdx.x];
  float p = 1.0f;
  for (int j = 0; j < fmas; ++j) p = __fmaf_rn(p, v, 1.0f);
  state[threadIdx.x] = first ? p : __fadd_rn(state[threadIdx.x], p);
}

class HighPriority {
 public:
  HighPriority() = default;
  HighPriority(const HighPriority&) = delete;
  HighPriority& operator=(const HighPriority&) = delete;

  void setup(const Args& /*a*/, cudaStream_t /*stream*/) {
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_bulk, cudaStreamNonBlocking));
    int least = 0, greatest = 0;
    AISP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    AISP_CUDA_CHECK(cudaStreamCreateWithPriority(&m_critical, cudaStreamNonBlocking, greatest));
    for (auto& e : m_events) AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  void launch(const Args& a, cudaStream_t stream) {
    auto& [fork, bulk_done, critical_done] = m_events;
    AISP_CUDA_CHECK(cudaEventRecord(fork, stream));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(m_bulk, fork, 0));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(m_critical, fork, 0));
    const auto blocks = static_cast<unsigned>((a.n + k_block_elems - 1) / k_block_elems);
    bulk_copy_kernel<<<blocks, k_threads, 0, m_bulk>>>(a.src, a.dst, a.n);
    AISP_CHECK_LAUNCH();
    for (int k = 0; k < a.steps; ++k) {
      critical_step_kernel<<<1, k_critical_threads, 0, m_critical>>>(a.x, a.state, a.fmas, k == 0);
      AISP_CHECK_LAUNCH();
    }
    AISP_CUDA_CHECK(cudaEventRecord(bulk_done, m_bulk));
    AISP_CUDA_CHECK(cudaEventRecord(critical_done, m_critical));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, bulk_done, 0));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, critical_done, 0));
  }

  ~HighPriority() {
    for (const cudaEvent_t e : m_events) {
      if (e) cudaEventDestroy(e);
    }
    if (m_critical) cudaStreamDestroy(m_critical);
    if (m_bulk) cudaStreamDestroy(m_bulk);
  }

 private:
  cudaStream_t m_bulk = nullptr;
  cudaStream_t m_critical = nullptr;
  std::array<cudaEvent_t, 3> m_events{};  // fork, bulk done, critical done
};

AISP_REGISTER_STATEFUL_VARIANT(PrioritiesProblem, HighPriority, .step = 2, .slug = "high_priority",
                               .kind = VariantKind::optimized,
                               .summary = "the critical chain on a stream of the greatest priority");

}  // namespace aisp::ch11::priorities::v02
