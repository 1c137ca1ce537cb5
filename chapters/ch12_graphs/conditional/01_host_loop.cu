// ch12:conditional:01_host_loop — the host runs the loop and reads the convergence flag back every
// iteration (the baseline).
//
// What: the loop as it is usually written first. Per launch: zero x, the flag and the counter on the
// stream; then per iteration: one iteration kernel (which sets the flag if any element moved and counts
// the iteration), a cudaMemcpyAsync of the 4-byte flag into pinned host memory, cudaStreamSynchronize,
// and the host's test: stop when nothing moved or max_iters is reached, else zero the flag and go again.
// Why it is slow: the host cannot know whether to launch iteration k + 1 before iteration k has finished
// and its flag has crossed PCIe, so every iteration pays a full round trip: the launch, the kernel, the
// copy, the synchronize's wake-up, and the device idles while the host decides. Nothing overlaps.
// Napkin math: per iteration about one launch + synchronize round trip (`aisp hw peaks`, ceiling
// launch_roundtrip, of the order of 10 µs) plus a small copy, against a kernel of a few µs; a few hundred
// iterations make milliseconds.
// Run: aisp bench run --targets ch12:conditional:01_host_loop
#include "chapters/ch12_graphs/conditional/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::conditional::v01 {

// One iteration of every element (reference.hpp iterate() and still_moving(), written out), then one
// flag write per block that saw movement, and the iteration counted once.
__global__ void iterate_kernel(const float* __restrict__ c, float* __restrict__ x, int n,
                               unsigned* __restrict__ moving, std::int32_t* __restrict__ iterations) {
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  int moved = 0;
  if (i < n) {
    const float old = x[i];
    const float next = c[i] / (1.0f + old);
    moved = fabsf(next - old) > k_rel_tol * fabsf(next) ? 1 : 0;
    x[i] = next;
  }
  // Every thread reaches the barrier (no early return above).
  if (__syncthreads_or(moved) != 0 && threadIdx.x == 0) atomicOr(moving, 1u);
  if (blockIdx.x == 0 && threadIdx.x == 0) *iterations += 1;  // kernels run one at a time: no race
}

class HostLoop {
 public:
  HostLoop() = default;
  HostLoop(const HostLoop&) = delete;
  HostLoop& operator=(const HostLoop&) = delete;

  // Pinned, so the 4-byte copy is a direct DMA, as a careful first version would have it.
  void setup(const Args& /*a*/, cudaStream_t /*stream*/) {
    m_moving_host = PinnedBuffer<unsigned>(1);
  }

  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUDA_CHECK(cudaMemsetAsync(a.x, 0, sizeof(float) * static_cast<std::size_t>(a.n), stream));
    AISP_CUDA_CHECK(cudaMemsetAsync(a.moving, 0, sizeof(unsigned), stream));
    AISP_CUDA_CHECK(cudaMemsetAsync(a.iterations, 0, sizeof(std::int32_t), stream));
    const int blocks = (a.n + k_threads - 1) / k_threads;
    for (int done = 1;; ++done) {
      iterate_kernel<<<blocks, k_threads, 0, stream>>>(a.c, a.x, a.n, a.moving, a.iterations);
      AISP_CHECK_LAUNCH();
      AISP_CUDA_CHECK(
          cudaMemcpyAsync(m_moving_host.data(), a.moving, sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
      AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (*m_moving_host.data() == 0 || done >= a.max_iters) break;
      AISP_CUDA_CHECK(cudaMemsetAsync(a.moving, 0, sizeof(unsigned), stream));
    }
  }

 private:
  PinnedBuffer<unsigned> m_moving_host;
};

AISP_REGISTER_STATEFUL_VARIANT(ConditionalProblem, HostLoop, .step = 1, .slug = "host_loop",
                               .kind = VariantKind::baseline,
                               .summary = "one kernel per iteration, the flag copied to the host and synchronized "
                                          "every iteration");

}  // namespace aisp::ch12::conditional::v01
