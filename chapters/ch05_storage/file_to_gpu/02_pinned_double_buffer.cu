// ch05:file_to_gpu:02_pinned_double_buffer — O_DIRECT reads into two pinned staging buffers; the copy
// of one buffer to the device runs while the next chunk is read into the other.
//
// What changed: the file is opened with O_DIRECT and read in `chunk`-sized pieces (16 MiB by default)
// straight into page-locked (cudaHostAlloc) buffers; each piece is queued as a cudaMemcpyAsync on the
// harness's stream as soon as it is in, and an event behind it says when its buffer is free again
// (reference.hpp double_buffer_schedule: wait for the slot, read, copy, record).
// Why it helps, three ways: (1) O_DIRECT skips the page cache: the drive DMAs into our buffer, with no
// CPU copy out of cache pages and no readahead heuristics; each 16 MiB pread reaches the drive as many
// large requests at once. (2) The buffers are pinned, so the copy engine DMAs from them directly: no
// driver staging copy. (3) Disk and link overlap: while chunk i crosses PCIe, the host reads chunk i+1;
// the link (~50 GB/s) is far faster than one drive, so every copy but the last hides under a read.
// What it costs: O_DIRECT needs the file offset, the length and the buffer aligned to 4 KiB (the range
// starts aligned, the buffers are aligned here, and the last chunk's request is rounded up: plan_chunks),
// and it never benefits from the page cache: with the file already in memory (--axis page_cache=1),
// step 01's read() is a memory copy and wins. Where the file system refuses O_DIRECT (tmpfs, some FUSE
// and network file systems) the step reads through the page cache instead and says so in its facts.
// Napkin math: time = bytes / (O_DIRECT read rate) + one chunk's copy (~0.3 ms): close to the measured
// disk_read ceiling, which reads the same way.
// Run: aisp bench run --targets ch05:file_to_gpu:02_pinned_double_buffer
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "chapters/ch05_storage/file_to_gpu/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch05::file_to_gpu::v02 {

class PinnedDoubleBuffer {
 public:
  PinnedDoubleBuffer() = default;
  PinnedDoubleBuffer(const PinnedDoubleBuffer&) = delete;
  PinnedDoubleBuffer& operator=(const PinnedDoubleBuffer&) = delete;
  ~PinnedDoubleBuffer() {
    for (cudaEvent_t e : m_done) {
      if (e) cudaEventDestroy(e);
    }
    if (m_fd >= 0) ::close(m_fd);
  }

  void setup(const Args& a, cudaStream_t) {
    m_fd = open_direct(a.path, m_refused);
    if (m_fd < 0) {
      m_fd = ::open(a.path, O_RDONLY);
      if (m_fd < 0) throw DataError(std::string("cannot open ") + a.path + ": " + std::strerror(errno));
    }
    // One allocation for both slots, with room to start them on a 4 KiB boundary.
    m_pinned = PinnedBuffer<std::uint8_t>(2 * a.chunk + k_direct_io_align);
    std::uint8_t* base = align_up(m_pinned.data());
    m_slot[0] = base;
    m_slot[1] = base + a.chunk;
    for (cudaEvent_t& e : m_done) AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m_chunks = plan_chunks(a.bytes, a.chunk);
    m_schedule = double_buffer_schedule(m_chunks.size());
  }

  void launch(const Args& a, cudaStream_t stream) {
    for (const IoStep& s : m_schedule) {
      const Chunk& c = m_chunks[s.chunk];
      std::uint8_t* slot = m_slot[s.slot];
      switch (s.op) {
        case IoOp::wait_slot:  // the slot's last copy has left it (an event never recorded is complete)
          AISP_CUDA_CHECK(cudaEventSynchronize(m_done[s.slot]));
          break;
        case IoOp::read:
          if (m_refused.empty()) {
            pread_direct(m_fd, slot, c.length, c.request, a.offset + c.first);
          } else {
            pread_exactly(m_fd, slot, c.length, a.offset + c.first);
          }
          break;
        case IoOp::copy:
          AISP_CUDA_CHECK(cudaMemcpyAsync(a.dst + c.first, slot, c.length, cudaMemcpyHostToDevice, stream));
          break;
        case IoOp::record_slot:
          AISP_CUDA_CHECK(cudaEventRecord(m_done[s.slot], stream));
          break;
      }
    }
  }

  std::vector<Fact> facts(const Args& a) {
    return {{"io", m_refused.empty() ? "O_DIRECT" : "page cache: " + m_refused},
            {"staging", "2 x " + std::to_string(a.chunk >> 10) + " KiB pinned"}};
  }

 private:
  int m_fd = -1;
  std::string m_refused;  // why O_DIRECT could not be used; "" when it is
  PinnedBuffer<std::uint8_t> m_pinned;
  std::uint8_t* m_slot[2] = {nullptr, nullptr};
  cudaEvent_t m_done[2] = {nullptr, nullptr};
  std::vector<Chunk> m_chunks;
  std::vector<IoStep> m_schedule;
};

AISP_REGISTER_STATEFUL_VARIANT(FileToGpuProblem, PinnedDoubleBuffer, .step = 2, .slug = "pinned_double_buffer",
                               .kind = VariantKind::step,
                               .summary = "O_DIRECT reads into two pinned buffers, each copy under the next read");

}  // namespace aisp::ch05::file_to_gpu::v02
