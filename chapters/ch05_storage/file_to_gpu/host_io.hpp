// The two ways ch05:file_to_gpu's steps read the file, host-only (POSIX, no CUDA) so that the CPU test
// runs them on a real file: a plain pread loop into any buffer (step 01, and step 02 where O_DIRECT is
// refused), and an O_DIRECT pread of an aligned request into an aligned buffer (step 02).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/ceilings/disk_read.hpp"
#include "core/base/error.hpp"

namespace aisp::ch05::file_to_gpu {

// Reads exactly `length` bytes at `offset`. pread may return less than asked (Linux moves at most
// 0x7ffff000 bytes per call, and signals interrupt): loop until done. Throws DataError on an error or
// the end of the file.
inline void pread_exactly(int fd, void* dst, std::size_t length, std::uint64_t offset) {
  auto* out = static_cast<std::uint8_t*>(dst);
  std::size_t got = 0;
  while (got < length) {
    const ssize_t r = ::pread(fd, out + got, length - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw DataError("read of the test file failed: " + std::string(std::strerror(errno)));
    if (r == 0) throw DataError("the test file ended early (at byte " + std::to_string(offset + got) + ")");
    got += static_cast<std::size_t>(r);
  }
}

// O_DIRECT: `offset`, `request` and `dst` must be multiples of k_direct_io_align (the kernel refuses
// anything else with EINVAL); at least `length` (<= request) bytes must arrive. A short read that is
// not at the end of the file returns whole aligned blocks, so the loop resumes at an aligned offset.
inline void pread_direct(int fd, void* dst, std::size_t length, std::size_t request, std::uint64_t offset) {
  if (offset % k_direct_io_align != 0 || request % k_direct_io_align != 0 || request < length ||
      reinterpret_cast<std::uintptr_t>(dst) % k_direct_io_align != 0) {
    throw DataError("O_DIRECT read not aligned to 4096 bytes");
  }
  auto* out = static_cast<std::uint8_t*>(dst);
  std::size_t got = 0;
  while (got < length) {
    const ssize_t r = ::pread(fd, out + got, request - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw DataError("O_DIRECT read of the test file failed: " + std::string(std::strerror(errno)));
    if (r == 0) throw DataError("the test file ended early (at byte " + std::to_string(offset + got) + ")");
    got += static_cast<std::size_t>(r);
    if (got < length && got % k_direct_io_align != 0) {
      throw DataError("O_DIRECT read returned a partial block before the end of the range");
    }
  }
}

// The first address at or after `p` that is a multiple of k_direct_io_align.
inline std::uint8_t* align_up(std::uint8_t* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return p + (round_up_to(a, k_direct_io_align) - a);
}

}  // namespace aisp::ch05::file_to_gpu
