#include "core/ceilings/disk_read.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <thread>

#include "core/base/error.hpp"
#include "core/measure/stats.hpp"

namespace aisp {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_probe_key = 0xD15C0005ULL;

std::string errno_text(int e) { return std::strerror(e); }

std::string size_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.3g} GiB", bytes / double(1 << 30));
  return fmt::format("{:.3g} MiB", bytes / double(1 << 20));
}

// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::uint8_t, FreeDeleter>;

AlignedBytes aligned_bytes(std::size_t bytes) {
  void* p = std::aligned_alloc(k_direct_io_align, round_up_to(bytes, k_direct_io_align));
  if (!p) throw std::bad_alloc();
  return AlignedBytes(static_cast<std::uint8_t*>(p));
}

// True when the file's first and last (up to) 4 KiB hold the pattern: a file left by an earlier run.
bool holds_pattern(const std::string& path, std::uint64_t bytes, std::uint64_t key) {
  const Fd f(::open(path.c_str(), O_RDONLY));
  if (f.fd < 0) return false;
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != bytes) return false;
  const std::uint64_t n = std::min<std::uint64_t>(bytes, k_direct_io_align);
  std::vector<std::uint8_t> got(n), want(n);
  for (const std::uint64_t at : {std::uint64_t{0}, bytes - n}) {
    if (::pread(f.fd, got.data(), n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) return false;
    fill_pattern_bytes(want.data(), n, at, key);
    if (got != want) return false;
  }
  return true;
}

}  // namespace

void fill_pattern_bytes(std::uint8_t* dst, std::size_t count, std::uint64_t first, std::uint64_t key) {
  std::size_t i = 0;
  for (; i < count && (first + i) % 4 != 0; ++i) dst[i] = pattern_file_byte(first + i, key);
  for (; i + 4 <= count; i += 4) {
    const std::uint32_t w = pattern_file_word((first + i) / 4, key);
    std::memcpy(dst + i, &w, 4);  // little-endian hosts: byte p % 4 of the word lands at p
  }
  for (; i < count; ++i) dst[i] = pattern_file_byte(first + i, key);
}

std::string aisp_cache_dir() {
  if (const char* d = std::getenv("AISP_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "aisp").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "aisp").string();
  return "/tmp/aisp-cache";
}

double gb_per_s(double bytes, double seconds) { return seconds > 0 ? bytes / seconds * 1e-9 : 0; }

std::string file_system_name(const std::string& path) {
  struct statfs s {};
  if (::statfs(path.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53UL: return "ext4";
    case 0x58465342UL: return "xfs";
    case 0x9123683EUL: return "btrfs";
    case 0x01021994UL: return "tmpfs";
    case 0x858458F6UL: return "ramfs";
    case 0x794C7630UL: return "overlay";
    case 0x6969UL: return "nfs";
    case 0x65735546UL: return "fuse";
    case 0x2FC12FC1UL: return "zfs";
    case 0x0BD00BD0UL: return "lustre";
    default: return fmt::format("fs {:#x}", static_cast<unsigned long>(s.f_type));
  }
}

void ensure_pattern_file(const std::string& path, std::uint64_t bytes, std::uint64_t key, std::uint64_t margin) {
  if (holds_pattern(path, bytes, key)) {
    drop_from_page_cache(path);  // the check read a few pages: a cold start stays cold
    return;
  }
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw DataError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) == 0) {
    const double free_bytes = static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize);
    std::error_code size_ec;
    const auto old = fs::exists(path, size_ec) ? fs::file_size(path, size_ec) : 0;  // replaced, so it counts
    if (free_bytes + static_cast<double>(size_ec ? 0 : old) < static_cast<double>(bytes + margin)) {
      throw DataError(fmt::format("not enough free space in {} for a {} test file ({} free, {} kept spare): set "
                                  "AISP_CACHE_DIR to a larger disk or pass a smaller size",
                                  dir.string(), size_text(double(bytes)), size_text(free_bytes),
                                  size_text(double(margin))));
    }
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  {
    const Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    if (f.fd < 0) throw DataError(fmt::format("cannot create {}: {}", tmp, errno_text(errno)));
    constexpr std::size_t k_block = std::size_t{16} << 20;
    std::vector<std::uint8_t> block(k_block);
    for (std::uint64_t at = 0; at < bytes;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(k_block, bytes - at));
      fill_pattern_bytes(block.data(), n, at, key);
      std::size_t done = 0;
      while (done < n) {
        const ssize_t w = ::pwrite(f.fd, block.data() + done, n - done, static_cast<off_t>(at + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          const int e = errno;
          ::unlink(tmp.c_str());
          throw DataError(fmt::format("cannot write {}: {}", tmp, errno_text(e)));
        }
        done += static_cast<std::size_t>(w);
      }
      at += n;
    }
    // Dirty pages cannot be dropped from the page cache: the data must be on the disk before any cold read.
    if (::fsync(f.fd) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw DataError(fmt::format("cannot flush {}: {}", tmp, errno_text(e)));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw DataError(fmt::format("cannot rename {} to {}: {}", tmp, path, errno_text(e)));
  }
  drop_from_page_cache(path);
}

double page_cache_resident_fraction(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  const Fd f(::open(path.c_str(), O_RDONLY));
  if (f.fd < 0) return -1;
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return -1;
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t first = offset / page * page;  // mmap wants a page-aligned offset
  const std::uint64_t end = length == 0 ? file_size : std::min(file_size, offset + length);
  if (end <= first) return 0;
  const auto size = static_cast<std::size_t>(end - first);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd, static_cast<off_t>(first));
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int rc = ::mincore(map, size, resident.data());
  ::munmap(map, size);
  if (rc != 0) return -1;
  const auto in = std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) != 0; });
  return static_cast<double>(in) / static_cast<double>(resident.size());
}

double drop_from_page_cache(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  double resident = -1;
  // One call can leave pages behind: those still in another CPU's LRU batch (the kernel drains only
  // some) or under writeback. Seen on an H200 host (2026-11-28): 1.5-2.9% of a file resident after one
  // call. A few more calls, a little apart, cost little next to a cold read of the range.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
    {
      const Fd f(::open(path.c_str(), O_RDONLY));
      if (f.fd < 0) return -1;
      if (::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return -1;
    }
    resident = page_cache_resident_fraction(path, offset, length);
    if (resident <= 0) break;
  }
  return resident;
}

int open_direct(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) return fd;
  const int e = errno;
  if (e == EINVAL) {
    why = fmt::format("O_DIRECT refused by the {} file system holding {} ({})", file_system_name(path), path,
                      errno_text(e));
    return -1;
  }
  throw DataError(fmt::format("cannot open {}: {}", path, errno_text(e)));
}

namespace {

// One whole-file pass by `threads` threads: thread t reads blocks t, t + threads, ... Returns seconds;
// throws on a read error or a wrong block. `refused` is set when the first read says EINVAL (a file
// system that takes the O_DIRECT flag at open but not the reads).
double timed_pass(int fd, const DiskReadOptions& o, int threads, std::vector<AlignedBytes>& buffers, bool& refused) {
  const std::uint64_t blocks = (o.file_bytes + o.block_bytes - 1) / o.block_bytes;
  std::mutex m;
  std::string error;
  const auto worker = [&](int t) {
    std::uint8_t* buf = buffers[static_cast<std::size_t>(t)].get();
    for (std::uint64_t j = static_cast<std::uint64_t>(t); j < blocks; j += static_cast<std::uint64_t>(threads)) {
      const std::uint64_t off = j * o.block_bytes;
      const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(o.block_bytes, o.file_bytes - off));
      std::size_t got = 0;
      while (got < len) {
        // The last block's request is rounded up to the alignment; the read stops at the end of the file.
        const std::size_t want = static_cast<std::size_t>(round_up_to(len - got, k_direct_io_align));
        const ssize_t r = ::pread(fd, buf + got, want, static_cast<off_t>(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (static_cast<std::size_t>(r) < len - got && r % static_cast<ssize_t>(k_direct_io_align) != 0)) {
          const int e = errno;
          const std::lock_guard<std::mutex> lock(m);
          if (r < 0 && e == EINVAL) refused = true;
          if (error.empty()) {
            error = r < 0 ? fmt::format("pread at {}: {}", off + got, errno_text(e))
                          : fmt::format("pread at {} returned {} bytes", off + got, r);
          }
          return;
        }
        got += static_cast<std::size_t>(r);
      }
      for (const std::size_t at : {std::size_t{0}, round_down_to(len / 2, 4), round_down_to(len - 1, 4)}) {
        if (at + 4 > len || (off + at) % 4 != 0) continue;
        std::uint32_t w = 0;
        std::memcpy(&w, buf + at, 4);
        if (w != pattern_file_word((off + at) / 4, k_probe_key)) {
          const std::lock_guard<std::mutex> lock(m);
          if (error.empty()) error = fmt::format("wrong data at byte {} of the probe file", off + at);
          return;
        }
      }
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!error.empty()) throw std::runtime_error("disk read probe: " + error);
  return s;
}

}  // namespace

DiskReadResult measure_disk_read(const DiskReadOptions& o) {
  if (o.block_bytes == 0 || o.block_bytes % k_direct_io_align != 0 || o.file_bytes == 0 || o.threads.empty()) {
    throw UsageError("disk read probe: the block must be a non-zero multiple of 4096 bytes, the file non-empty");
  }
  DiskReadResult r;
  const std::string dir = o.dir.empty() ? aisp_cache_dir() : o.dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (const std::string kind = file_system_name(dir); kind == "tmpfs" || kind == "ramfs") {
    r.skipped = fmt::format("{} is on {}, which keeps files in memory: there is no disk to measure (O_DIRECT "
                            "reads would time memory); set AISP_CACHE_DIR to a directory on a local disk",
                            dir, kind);
    return r;
  }
  const std::string path =
      (fs::path(dir) / fmt::format("disk_probe_{}.bin", static_cast<unsigned long long>(o.file_bytes))).string();
  try {
    ensure_pattern_file(path, o.file_bytes, k_probe_key, std::uint64_t{256} << 20);
  } catch (const DataError& e) {
    r.skipped = e.what();
    return r;
  }
  struct Cleanup {
    const std::string& path;
    bool keep;
    ~Cleanup() {
      if (!keep) ::unlink(path.c_str());
    }
  } cleanup{path, o.keep_file};
  std::string why;
  const Fd f(open_direct(path, why));
  if (f.fd < 0) {
    r.skipped = why + "; set AISP_CACHE_DIR to a directory on a local disk";
    return r;
  }
  const std::string fs_name = file_system_name(path);
  std::vector<std::pair<int, double>> medians;  // per method: threads, GB/s
  for (const int threads : o.threads) {
    std::vector<AlignedBytes> buffers;
    for (int t = 0; t < threads; ++t) buffers.push_back(aligned_bytes(o.block_bytes));
    std::vector<double> rates;
    for (std::size_t pass = 0; pass < o.min_passes; ++pass) {
      bool refused = false;
      double s = 0;
      try {
        s = timed_pass(f.fd, o, threads, buffers, refused);
      } catch (const std::runtime_error&) {
        if (!refused) throw;
        r.skipped = fmt::format("O_DIRECT reads refused by the {} file system holding {}; set AISP_CACHE_DIR to a "
                                "directory on a local disk",
                                fs_name, dir);
        return r;
      }
      rates.push_back(gb_per_s(static_cast<double>(o.file_bytes), s));
    }
    medians.emplace_back(threads, stats::median(rates));
    if (medians.back().second > r.gb_per_s) {
      r.gb_per_s = medians.back().second;
      r.samples = rates.size();
      r.method = fmt::format(
          "O_DIRECT pread of a {} pattern file in {} blocks by {} thread{}, in {} ({}); every block checked",
          size_text(double(o.file_bytes)), size_text(double(o.block_bytes)), threads, threads == 1 ? "" : "s", dir,
          fs_name);
    }
  }
  for (const auto& [threads, gb_s] : medians) {
    if (gb_s == r.gb_per_s) continue;
    r.note += fmt::format("{}{:.2f} GB/s with {} thread{}", r.note.empty() ? "" : "; ", gb_s, threads,
                          threads == 1 ? "" : "s");
  }
  return r;
}

}  // namespace aisp
