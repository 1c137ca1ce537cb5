// ch03:pinned_transfer:03_chunked_overlap — pinned copies in chunks over two streams, each chunk consumed
// while the next one crosses the bus.
//
// What changed: the buffer is cut into `chunks` pieces (split_into_chunks in reference.hpp). Chunk i is
// copied and then consumed on stream i % 2: the harness's stream for even chunks, a second stream made
// in setup() for odd ones. Stream order makes the kernel of a chunk wait for that chunk's copy only; the
// copy engine moves chunk i+1 (other stream) while the SMs run chunk i's kernel. The second stream forks
// from the harness's stream with an event before the first copy and joins back into it with another
// event after its last kernel, so all the work lies between the harness's start and end events.
// Why it helps: copy and compute use different hardware (a copy engine and the PCIe link; the SMs), so
// they can run at the same time: the time becomes about max(copy, kernel) plus one chunk's share of the
// other, instead of copy + kernel. Two streams are enough: each stream's next copy waits for its
// previous kernel, which finishes during the other stream's copy as long as a chunk's kernel is shorter
// than a chunk's copy (at the defaults ~0.13 ms against ~0.32 ms).
// What it cannot do: beat the copy. With a light kernel (--axis fma=0 or 256) there is little to hide and
// 03 is step 02's time; the win grows with the kernel's share up to 2x when kernel and copy are equal.
// Napkin math: at the defaults, ~5 ms of copy + ~0.13 ms for the last chunk's kernel, against step 02's
// ~7 ms: ~1.4x, and the copy at ~95% of the measured h2d_pinned.
// Run: aisp bench run --targets ch03:pinned_transfer:03_chunked_overlap
#include "chapters/ch03_system/pinned_transfer/problem.hpp"

namespace aisp::ch03::pinned_transfer::v03 {

class ChunkedOverlap {
 public:
  ChunkedOverlap() = default;
  ChunkedOverlap(const ChunkedOverlap&) = delete;
  ChunkedOverlap& operator=(const ChunkedOverlap&) = delete;
  ~ChunkedOverlap() {
    if (m_fork) cudaEventDestroy(m_fork);
    if (m_join) cudaEventDestroy(m_join);
    if (m_side) cudaStreamDestroy(m_side);
  }

  void setup(const Args& a, cudaStream_t) {
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_side, cudaStreamNonBlocking));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_fork, cudaEventDisableTiming));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_join, cudaEventDisableTiming));
    m_chunks = split_into_chunks(a.n, static_cast<std::size_t>(a.chunks));
  }

  void launch(const Args& a, cudaStream_t stream) {
    // The side stream starts after everything the harness queued before this launch.
    AISP_CUDA_CHECK(cudaEventRecord(m_fork, stream));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(m_side, m_fork, 0));
    for (std::size_t i = 0; i < m_chunks.size(); ++i) {
      const Chunk c = m_chunks[i];
      const cudaStream_t s = i % 2 == 0 ? stream : m_side;
      AISP_CUDA_CHECK(cudaMemcpyAsync(a.out + c.first, a.pinned + c.first, c.count * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
      enqueue_consume(a.out + c.first, c.count, a.fma, s);
    }
    // The harness's stream goes on only after the side stream's last kernel.
    AISP_CUDA_CHECK(cudaEventRecord(m_join, m_side));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, m_join, 0));
  }

 private:
  cudaStream_t m_side = nullptr;
  cudaEvent_t m_fork = nullptr, m_join = nullptr;
  std::vector<Chunk> m_chunks;
};

AISP_REGISTER_STATEFUL_VARIANT(PinnedTransferProblem, ChunkedOverlap, .step = 3, .slug = "chunked_overlap",
                               .kind = VariantKind::optimized,
                               .summary = "pinned chunks over two streams, each chunk's kernel under the next copy");

}  // namespace aisp::ch03::pinned_transfer::v03
