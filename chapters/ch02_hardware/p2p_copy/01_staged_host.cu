// ch02:p2p_copy:01_staged_host — through host memory: peer GPU -> pinned host buffer -> this GPU.
//
// What it does: two cudaMemcpyAsync calls on the harness stream, device to host from the peer's buffer
// into a pinned staging buffer, then host to device into this GPU. What a program does when it does not
// know (or cannot use) peer access. The driver runs the first copy on the peer's own copy engine (seen in
// the audit's CUPTI records on an H200 pair), hence the declared "peer_gpu" feature.
// Why it is slow: every byte crosses PCIe twice, one direction after the other, and never NVLink.
// Napkin math: 1 GiB at ~55 GB/s each way (PCIe Gen5 x16, measured h2d/d2h pinned) = ~2 x 20 ms = ~40 ms,
// about a tenth of the peer ceiling on NVLink-connected GPUs.
// Run: aisp bench run --targets ch02:p2p_copy:01_staged_host
#include "chapters/ch02_hardware/p2p_copy/problem.hpp"

namespace aisp::ch02::p2p_copy::v01 {

class StagedHost {
 public:
  void setup(const Args& a, cudaStream_t) { m_host = PinnedBuffer<float>(a.n); }
  void launch(const Args& a, cudaStream_t stream) {
    // cudaMemcpyDefault: with unified addressing the runtime finds which GPU each pointer lives on.
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_host.data(), a.src, a.n * sizeof(float), cudaMemcpyDefault, stream));
    AISP_CUDA_CHECK(cudaMemcpyAsync(a.dst, m_host.data(), a.n * sizeof(float), cudaMemcpyDefault, stream));
  }

 private:
  PinnedBuffer<float> m_host;
};

AISP_REGISTER_STATEFUL_VARIANT(P2pCopyProblem, StagedHost, .step = 1, .slug = "staged_host",
                               .kind = VariantKind::baseline,
                               .summary = "device to pinned host, then host to device: PCIe twice",
                               // peer_gpu: the peer's copy engine does the first half, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::ch02::p2p_copy::v01
