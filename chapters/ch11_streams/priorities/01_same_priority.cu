// ch11:priorities:01_same_priority — the bulk copy and the critical chain on two streams of the same
// (default) priority (the baseline).
//
// What: setup() creates two streams. Each launch forks both from the harness's stream, issues the bulk
// copy (one grid of n / 1,024 short blocks) on the bulk stream, then the `steps` kernels of the critical
// chain (one 256-thread block each, `fmas` dependent FMAs per thread, each adding to the state the one
// before left) on the critical stream, and joins both back. Putting latency-critical work on its own
// stream is the usual first step, and the right one: without it the chain would queue behind the copy in
// stream order.
// Why it is slow: a separate stream is not enough. The block scheduler serves grids of equal priority in
// the order they arrived (observed behaviour; the programming guide promises no order between streams):
// while the copy's grid still has blocks to hand out, a chain kernel that arrives waits, even though a
// single free slot would do for its one block. So the chain runs after the copy (its
// first kernel perhaps before it), one small kernel at a time on an otherwise idle GPU.
// Napkin math (defaults, H200): 2 x 1 GiB at ~4 TB/s of DRAM copy ~ 0.55 ms; 128 chain kernels of 1,024
// dependent FMAs (~4 cycles each, ~2 us per kernel) plus the gap between dependent launches, a few
// hundred us in all: makespan ~ copy + chain.
// Run: aisp bench run --targets ch11:priorities:01_same_priority
#include <array>

#include "chapters/ch11_streams/priorities/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::priorities::v01 {

constexpr int k_threads = 256;
constexpr int k_per_thread = 4;  // independent loads in flight per thread
constexpr int k_block_elems = k_threads * k_per_thread;

// Short blocks on purpose: each copies 4 KiB and retires, so slots free up all the time. That is what gives
// the scheduler the choice this ladder is about (a grid of persistent blocks would never free one).
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

class SamePriority {
 public:
  SamePriority() = default;
  SamePriority(const SamePriority&) = delete;
  SamePriority& operator=(const SamePriority&) = delete;

  void setup(const Args& /*a*/, cudaStream_t /*stream*/) {
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_bulk, cudaStreamNonBlocking));
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_critical, cudaStreamNonBlocking));
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

  ~SamePriority() {
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

AISP_REGISTER_STATEFUL_VARIANT(PrioritiesProblem, SamePriority, .step = 1, .slug = "same_priority",
                               .kind = VariantKind::baseline,
                               .summary = "copy and critical chain on two streams of equal priority");

}  // namespace aisp::ch11::priorities::v01
