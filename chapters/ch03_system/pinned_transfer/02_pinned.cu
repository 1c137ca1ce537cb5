// ch03:pinned_transfer:02_pinned — the same copy from pinned (page-locked) host memory.
//
// What changed: the source is the copy of the data in memory allocated with cudaHostAlloc instead of
// new[]. Same one cudaMemcpyAsync, same kernel after it.
// Why it helps: pinned pages cannot be moved or swapped by the OS, so the copy engine DMAs straight from
// them: no staging copy by the CPU, the copy is asynchronous to the host, and the PCIe link runs at its
// DMA rate. The price is that pinned memory is taken from the OS for good (allocating it is slow, and
// pinning too much starves the rest of the system), so a loader pins a few staging buffers and reuses
// them rather than pinning everything.
// What it leaves: the kernel still waits for the whole copy, and the copy engine idles while the kernel
// runs: time = copy + kernel.
// Napkin math: 256 MiB at the measured h2d_pinned (~53 GB/s on PCIe Gen5 x16: ~5 ms), plus ~2 ms of
// kernel at the defaults.
// Run: aisp bench run --targets ch03:pinned_transfer:02_pinned
#include "chapters/ch03_system/pinned_transfer/problem.hpp"

namespace aisp::ch03::pinned_transfer::v02 {

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.out, a.pinned, a.n * sizeof(float), cudaMemcpyHostToDevice, stream));
  enqueue_consume(a.out, a.n, a.fma, stream);
}

AISP_REGISTER_VARIANT(PinnedTransferProblem, launch, .step = 2, .slug = "pinned", .kind = VariantKind::step,
                      .summary = "cudaMemcpyAsync from pinned host memory, then the kernel");

}  // namespace aisp::ch03::pinned_transfer::v02
