// ch01:goodput:01_sync_every_step — read each step's loss back to the host as soon as it exists.
//
// What it does: reset w, then for every step: the step's four kernels, a 4-byte device-to-host copy of
// its loss into pinned memory, cudaStreamSynchronize, and a host check of the value (log it, stop if it
// is not finite). This is `loss.item()` in every iteration of a PyTorch loop: the first version of a
// training loop anybody writes, and a reasonable one: it lets the host react within the step.
// Why it is slow: the synchronization drains the GPU's queue. While the host waits for the copy, and
// then issues step s+1's kernels one by one, the GPU has nothing to run: each step pays a copy, a
// synchronization round trip and the launch latency of its first kernel on top of its GPU work, and the
// host can never run ahead to queue the next steps while the GPU computes.
// Napkin math: a sync round trip plus the small copy is ~10-20 us on a PCIe host; the launch of the next
// kernel ~3-5 us before the GPU sees it. At the default n = 2^20 a step is four kernels of a few
// microseconds on data in L2, so the per-step overhead is comparable to the work; at n = 2^24 the work
// is ~10x larger and the same overhead matters far less.
// Run: aisp bench run --targets ch01:goodput:01_sync_every_step
#include "chapters/ch01_goodput/goodput/problem.hpp"

namespace aisp::ch01::goodput::v01 {

class SyncEveryStep {
 public:
  void setup(const Args& a, cudaStream_t) { m_host = PinnedBuffer<float>(static_cast<std::size_t>(a.steps)); }

  void launch(const Args& a, cudaStream_t stream) {
    enqueue_reset(a, stream);
    for (int s = 0; s < a.steps; ++s) {
      enqueue_training_step(a, s, stream);
      AISP_CUDA_CHECK(
          cudaMemcpyAsync(m_host.data() + s, a.losses + s, sizeof(float), cudaMemcpyDeviceToHost, stream));
      AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host needs the value now: wait for it
      check_loss(m_host.data()[s], s);
    }
  }

 private:
  // Pinned, so that the read-back is plain DMA (a pageable destination adds a staging copy to each one).
  PinnedBuffer<float> m_host;
};

AISP_REGISTER_STATEFUL_VARIANT(GoodputProblem, SyncEveryStep, .step = 1, .slug = "sync_every_step",
                               .kind = VariantKind::baseline,
                               .summary = "each step's loss copied to the host and checked, a stream sync per step");

}  // namespace aisp::ch01::goodput::v01
