// ch05:file_to_gpu:01_pageable_read — read() the whole range into ordinary (pageable) memory, then one
// copy to the device. The baseline: what a first loader does (np.fromfile / torch.load and .cuda()).
//
// What it does: setup() opens the file plainly and allocates a host buffer of `bytes` with new[] (every
// page touched once, so no page faults land in a sample). launch() preads the range into it (in a loop:
// Linux moves at most ~2 GiB per call) and queues one cudaMemcpyAsync to the device on the harness's
// stream.
// Why it is slow: two things in series, each slower than it need be. The read goes through the page
// cache: the kernel reads the disk into cache pages ahead of the request (readahead, in windows bounded
// by the device's read_ahead_kb) and then copies them into the buffer with the CPU.
// Only when the whole file is in does the copy start, and from pageable memory the driver must first
// copy each piece with the CPU into its own pinned buffer before the DMA engine may touch it. The disk
// idles while the link works and the link idles while the disk works.
// Napkin math: time = bytes / (buffered read rate) + bytes / (h2d_pageable rate). With an NVMe drive at
// a few GB/s and a pageable copy at ~10-20 GB/s, 1 GiB takes roughly 0.3-0.6 s, mostly the read.
// Run: aisp bench run --targets ch05:file_to_gpu:01_pageable_read
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "chapters/ch05_storage/file_to_gpu/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch05::file_to_gpu::v01 {

class PageableRead {
 public:
  PageableRead() = default;
  PageableRead(const PageableRead&) = delete;
  PageableRead& operator=(const PageableRead&) = delete;
  ~PageableRead() {
    if (m_fd >= 0) ::close(m_fd);
  }

  void setup(const Args& a, cudaStream_t) {
    m_fd = ::open(a.path, O_RDONLY);
    if (m_fd < 0) throw DataError(std::string("cannot open ") + a.path + ": " + std::strerror(errno));
    m_host = std::make_unique<std::uint8_t[]>(a.bytes);  // value-initialized: every page touched now
  }

  void launch(const Args& a, cudaStream_t stream) {
    pread_exactly(m_fd, m_host.get(), a.bytes, a.offset);
    // From pageable memory the call returns once the driver has staged the bytes (the buffer may then be
    // reused); the DMA itself finishes on the stream, which the harness synchronizes.
    AISP_CUDA_CHECK(cudaMemcpyAsync(a.dst, m_host.get(), a.bytes, cudaMemcpyHostToDevice, stream));
  }

 private:
  int m_fd = -1;
  std::unique_ptr<std::uint8_t[]> m_host;
};

AISP_REGISTER_STATEFUL_VARIANT(FileToGpuProblem, PageableRead, .step = 1, .slug = "pageable_read",
                               .kind = VariantKind::baseline,
                               .summary = "read() the range into pageable memory, then one cudaMemcpyAsync");

}  // namespace aisp::ch05::file_to_gpu::v01
