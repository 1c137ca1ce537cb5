// The disk's sequential read rate, measured the honest way: a file of a known pattern is written and
// flushed, then read back with O_DIRECT (no page cache can serve it) in large aligned blocks, and every
// block's contents are checked. Host-only, no CUDA: `aisp hw peaks` records the result as the
// "disk_read" ceiling (device/probes_disk.cpp), against which ch05:file_to_gpu is placed. The file's
// pattern and the aligned-block arithmetic are shared with that ladder, which reads files of the same
// pattern.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aisp {

// O_DIRECT needs the file offset, the length and the buffer aligned to the device's logical block
// (512 B or 4 KiB); 4 KiB satisfies both, and is the page size, which pinned allocations already meet.
inline constexpr std::size_t k_direct_io_align = 4096;

constexpr std::uint64_t round_up_to(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }
constexpr std::uint64_t round_down_to(std::uint64_t x, std::uint64_t a) { return x / a * a; }

// The 32-bit word at word index `i` of a pattern file with `key`: a counter-based hash (splitmix64's
// finalizer), so any range can be generated or checked without the rest, on the host or (constexpr)
// on the device. Byte p of the file is byte p % 4 of word p / 4, little-endian.
constexpr std::uint32_t pattern_file_word(std::uint64_t i, std::uint64_t key) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ULL + key;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<std::uint32_t>((z ^ (z >> 31)) >> 16);
}
constexpr std::uint8_t pattern_file_byte(std::uint64_t p, std::uint64_t key) {
  return static_cast<std::uint8_t>(pattern_file_word(p / 4, key) >> (8 * (p % 4)));
}

// Fills dst[0, count) with the pattern bytes at file positions [first, first + count).
void fill_pattern_bytes(std::uint8_t* dst, std::size_t count, std::uint64_t first, std::uint64_t key);

// Where aisp keeps large generated files (the disk probe's, ch05's test file): $AISP_CACHE_DIR, else
// $XDG_CACHE_HOME/aisp, else $HOME/.cache/aisp, else /tmp/aisp-cache. Not created here.
std::string aisp_cache_dir();

// GB/s (1e9 bytes per second) for `bytes` in `seconds`; 0 when seconds is not positive.
double gb_per_s(double bytes, double seconds);

// The file system holding `path`, as a word: "ext4", "xfs", "tmpfs", "overlay", "nfs", ... or the magic
// number in hex. "?" when it cannot be asked.
std::string file_system_name(const std::string& path);

// Writes `bytes` of the pattern with `key` to `path` if it is not already there: written under a
// temporary name, flushed to the disk (fsync) and renamed, so that a file of the final name is always
// complete; then its pages are dropped from the page cache. An existing file of the right size whose
// first and last 4 KiB hold the pattern is kept. Throws DataError when `dir` lacks the space (with
// `margin` bytes to spare) or the file cannot be written.
void ensure_pattern_file(const std::string& path, std::uint64_t bytes, std::uint64_t key,
                         std::uint64_t margin = std::uint64_t{1} << 30);

// Asks the kernel to drop the file's pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED).
// Only clean pages that nobody maps or locks are dropped, and a page still on another CPU's LRU batch
// can be skipped by one call: pages still resident in [offset, offset + length) (the whole file when
// length is 0) are asked again, a few times. Returns the fraction of that range's pages still resident
// afterwards (mincore on a mapping of it), which is what says whether a following read of the range is
// cold. -1 when residency cannot be asked.
double drop_from_page_cache(const std::string& path, std::uint64_t offset = 0, std::uint64_t length = 0);
// The fraction of the pages of [offset, offset + length) (the whole file when length is 0) in the page
// cache (mincore), -1 when it cannot be asked.
double page_cache_resident_fraction(const std::string& path, std::uint64_t offset = 0, std::uint64_t length = 0);

// Opens `path` read-only with O_DIRECT. When the file system refuses O_DIRECT (tmpfs, some FUSE and
// network file systems: EINVAL), returns -1 with `why` saying so; other errors throw DataError.
int open_direct(const std::string& path, std::string& why);

struct DiskReadOptions {
  std::string dir;                                 // where the probe file lives; "" = aisp_cache_dir()
  std::uint64_t file_bytes = std::uint64_t{1} << 30;
  std::size_t block_bytes = std::size_t{16} << 20;  // per pread; a multiple of k_direct_io_align
  std::vector<int> threads = {1, 4};               // the methods tried; the fastest is the ceiling
  std::size_t min_passes = 10;                     // whole-file passes per method
  bool keep_file = false;                          // leave the probe file for the next run
};

struct DiskReadResult {
  double gb_per_s = 0;   // median pass of the fastest method
  std::size_t samples = 0;
  std::string method;    // how the winning method read
  std::string note;      // the other methods' medians
  std::string skipped;   // non-empty: not measurable here (no O_DIRECT, no space), and why
};

// Reads the probe file `min_passes` times per method with O_DIRECT, each pass timed by the wall clock
// and each block checked against the pattern (its first, middle and last words). Skipped, with the
// reason, on tmpfs or ramfs (memory, not a disk: recent kernels accept O_DIRECT there), where O_DIRECT
// is refused, or where the folder lacks the space. Throws
// std::runtime_error on a read error or a wrong block.
DiskReadResult measure_disk_read(const DiskReadOptions& options);

}  // namespace aisp
