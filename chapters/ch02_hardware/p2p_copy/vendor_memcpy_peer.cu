// ch02:p2p_copy:vendor_memcpy_peer — cudaMemcpyPeerAsync with peer access enabled: the driver's copy.
//
// With peer access on, the copy engines move the data directly over NVLink (or PCIe P2P), no host memory
// and no SMs involved. The reference the other steps report "% of vendor" against.
// Run: aisp bench run --targets ch02:p2p_copy:vendor_memcpy_peer
#include "chapters/ch02_hardware/p2p_copy/problem.hpp"

namespace aisp::ch02::p2p_copy::vendor {

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemcpyPeerAsync(a.dst, a.device, a.src, a.peer, a.n * sizeof(float), stream));
}

// "peer_gpu": with peer access enabled both ways (a ladder before this one in the process may have
// enabled the other direction), the driver may run a peer copy on the other GPU's copy engine, and the
// activity records then place it there (seen on nvidia-h200-x2 in the in-process correctness test).
AISP_REGISTER_VARIANT(P2pCopyProblem, launch, .step = 0, .slug = "memcpy_peer", .kind = VariantKind::vendor,
                      .summary = "cudaMemcpyPeerAsync, peer access enabled: the copy engines over the link",
                      .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::ch02::p2p_copy::vendor
