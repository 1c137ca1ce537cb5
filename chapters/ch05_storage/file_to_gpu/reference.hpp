// The host side of ch05:file_to_gpu that needs no GPU, tested by cpu_test_file_to_gpu.cpp: where a
// seed's bytes lie in the test file, how a range is cut into O_DIRECT-aligned chunks, and the order in
// which step 02 reads, copies and waits with its two staging buffers. The file's contents are the
// pattern of core/ceilings/disk_read.hpp (pattern_file_byte), so every byte can be recomputed anywhere.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/ceilings/disk_read.hpp"

namespace aisp::ch05::file_to_gpu {

// The key of the test file's pattern (fixed: the file is written once and reused across runs).
inline constexpr std::uint64_t k_file_key = 0xF11E70C0ULL;

// The file holds the `bytes` a launch reads plus 64 MiB of slack: each seed reads the range that starts
// at its own aligned offset into the slack (16,385 possible offsets), so the gate's two seeds see
// different bytes (a cached answer fails) while the file is written only once; and cold samples walk
// through it (next_sample_offset).
constexpr std::uint64_t slack_bytes(std::uint64_t) { return std::uint64_t{64} << 20; }
constexpr std::uint64_t file_bytes_for(std::uint64_t bytes) {
  return round_up_to(bytes, k_direct_io_align) + slack_bytes(bytes);
}

// The first byte of a seed's range: a multiple of k_direct_io_align in [0, slack_bytes(bytes)], so an
// O_DIRECT read of the range, rounded up to the alignment, stays inside the file.
constexpr std::uint64_t seed_offset(std::uint64_t seed, std::uint64_t bytes) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL;  // splitmix64: neighbouring seeds land far apart
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const std::uint64_t choices = slack_bytes(bytes) / k_direct_io_align + 1;
  return z % choices * k_direct_io_align;
}

// Where the next cold sample reads: a range that starts a gap after this one ends, wrapping inside
// the slack. The page cache is dropped before every cold sample, but a cache below it (the drive's own, a
// hypervisor's under a virtual disk) is not. On nvidia-h200-x2, 3 MiB ranges read again took 2.07 ms
// where fresh ones took 2.69 ms, and the harness's fresh-input check called the variant INVALID; with
// each sample reading the range right after the previous one, they took 1.98 ms against 2.85 ms for a
// fresh seed's range: a sequential walk is what readahead below the page cache serves best. A gap of
// k_sample_gap_bytes (or the range's own length, if larger) puts the next range out of that reach, as
// a fresh seed's range almost always is. Where the slack holds ranges and gaps (ranges up to ~16 MiB),
// consecutive samples never touch; a range larger than that still moves, but overlaps earlier ones, and
// the README says what that measures.
inline constexpr std::uint64_t k_sample_gap_bytes = std::uint64_t{8} << 20;
constexpr std::uint64_t next_sample_offset(std::uint64_t offset, std::uint64_t bytes) {
  const std::uint64_t choices = slack_bytes(bytes) / k_direct_io_align + 1;
  const std::uint64_t span = round_up_to(bytes, k_direct_io_align);
  const std::uint64_t step = (span + std::max(span, k_sample_gap_bytes)) / k_direct_io_align;
  return (offset / k_direct_io_align + step) % choices * k_direct_io_align;
}

// One piece of a range: `length` bytes at `first` (relative to the range's start, which is aligned).
// `request` is what an O_DIRECT read asks for: the length rounded up to the alignment (only the last
// chunk's differs); the extra bytes land in the staging buffer and are never copied.
struct Chunk {
  std::size_t first = 0;
  std::size_t length = 0;
  std::size_t request = 0;
};

// Cuts `bytes` into chunks of `chunk` bytes (a multiple of k_direct_io_align) and a shorter last one.
inline std::vector<Chunk> plan_chunks(std::size_t bytes, std::size_t chunk) {
  std::vector<Chunk> out;
  if (chunk == 0) return out;
  out.reserve((bytes + chunk - 1) / chunk);
  for (std::size_t first = 0; first < bytes; first += chunk) {
    const std::size_t length = std::min(chunk, bytes - first);
    out.push_back({first, length, static_cast<std::size_t>(round_up_to(length, k_direct_io_align))});
  }
  return out;
}

// Step 02's schedule over two staging buffers ("slots"): for chunk i in slot i % 2, wait until the
// slot's previous copy has left it (its event), read the chunk into it, queue its copy to the device,
// record the slot's event behind that copy. The copy of chunk i then runs while the host reads chunk
// i + 1 into the other slot: the disk and the PCIe link work at the same time. The first wait on each
// slot covers a copy the previous launch may still have in flight (back-to-back launches).
enum class IoOp { wait_slot, read, copy, record_slot };
struct IoStep {
  IoOp op;
  std::size_t chunk;  // unused by wait_slot / record_slot
  int slot;
};

inline std::vector<IoStep> double_buffer_schedule(std::size_t chunks) {
  std::vector<IoStep> s;
  s.reserve(4 * chunks);
  for (std::size_t i = 0; i < chunks; ++i) {
    const int slot = static_cast<int>(i % 2);
    s.push_back({IoOp::wait_slot, i, slot});
    s.push_back({IoOp::read, i, slot});
    s.push_back({IoOp::copy, i, slot});
    s.push_back({IoOp::record_slot, i, slot});
  }
  return s;
}

}  // namespace aisp::ch05::file_to_gpu
