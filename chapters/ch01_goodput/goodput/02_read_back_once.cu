// ch01:goodput:02_read_back_once — keep the losses on the device; read them all back after the last step.
//
// What changed: the loop only enqueues. Every step's loss kernel already writes losses[step] on the
// device; after the last step one device-to-host copy brings all `steps` losses to pinned memory, one
// cudaStreamSynchronize waits for it, and the host checks every loss as step 01 does. Same kernels,
// same values, bit-identical losses.
// Why it helps: nothing on the host waits for the GPU inside the loop, so the host queues step after
// step while the GPU runs them back to back: the GPU's idle gaps between steps (the sync round trip and
// the next launch's latency) disappear, and the host's launch cost overlaps the GPU's work. One copy of
// `steps` floats costs what one copy of one float does.
// What it gives up: the host learns of a diverging loss only at the end of the launch (here, 100
// steps). Real loops pick a middle ground: read back every k steps, or keep the check on the device
// and read a flag.
// Napkin math: per step, max(GPU work, host launch cost of 4 kernels, ~10 us) instead of their sum plus
// a sync: at the default n = 2^20, expect roughly 2x fewer microseconds per step; at 2^24 a few percent.
// Run: aisp bench run --targets ch01:goodput:02_read_back_once
#include "chapters/ch01_goodput/goodput/problem.hpp"

namespace aisp::ch01::goodput::v02 {

class ReadBackOnce {
 public:
  void setup(const Args& a, cudaStream_t) { m_host = PinnedBuffer<float>(static_cast<std::size_t>(a.steps)); }

  void launch(const Args& a, cudaStream_t stream) {
    enqueue_reset(a, stream);
    for (int s = 0; s < a.steps; ++s) enqueue_training_step(a, s, stream);
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_host.data(), a.losses, sizeof(float) * static_cast<std::size_t>(a.steps),
                                    cudaMemcpyDeviceToHost, stream));
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // once, for all the losses
    for (int s = 0; s < a.steps; ++s) check_loss(m_host.data()[s], s);
  }

 private:
  // Pinned, so that the read-back is plain DMA (a pageable destination adds a staging copy to each one).
  PinnedBuffer<float> m_host;
};

AISP_REGISTER_STATEFUL_VARIANT(GoodputProblem, ReadBackOnce, .step = 2, .slug = "read_back_once",
                               .kind = VariantKind::optimized,
                               .summary = "losses kept on the device, one copy and one sync after the last step");

}  // namespace aisp::ch01::goodput::v02
