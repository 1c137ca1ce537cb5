// ch03:pinned_transfer:01_pageable — copy from ordinary (pageable) host memory, then run the kernel.
//
// What it does: one cudaMemcpyAsync of the whole buffer from memory allocated with new[] (as a loader
// that reads a file into a std::vector has it), then the consuming kernel over all of it, both on the
// harness's stream. (The stream form of cudaMemcpy, so that the copy is on the stream the harness times;
// from pageable memory it behaves like cudaMemcpy: the calling thread waits.)
// Why it is slow: the GPU's copy engines can only read memory the OS will not move, so the driver copies
// the data, piece by piece, into its own pinned staging buffers with the CPU and DMAs each piece from
// there: every byte crosses the host's memory twice more (a CPU read and write) before it crosses PCIe,
// and the CPU copy and the DMA pipeline only as well as the driver's staging allows. Then the kernel
// starts only after the last byte has landed.
// Napkin math: the measured h2d_pageable ceiling against h2d_pinned (`aisp hw peaks`); often half or
// less of pinned, depending on the host's memory bandwidth and the CPU. Plus the kernel (~2 ms at the
// defaults on a Hopper GPU), not overlapped.
// Run: aisp bench run --targets ch03:pinned_transfer:01_pageable
#include "chapters/ch03_system/pinned_transfer/problem.hpp"

namespace aisp::ch03::pinned_transfer::v01 {

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.out, a.pageable, a.n * sizeof(float), cudaMemcpyHostToDevice, stream));
  enqueue_consume(a.out, a.n, a.fma, stream);
}

AISP_REGISTER_VARIANT(PinnedTransferProblem, launch, .step = 1, .slug = "pageable", .kind = VariantKind::baseline,
                      .summary = "cudaMemcpyAsync from pageable host memory, then the kernel");

}  // namespace aisp::ch03::pinned_transfer::v01
