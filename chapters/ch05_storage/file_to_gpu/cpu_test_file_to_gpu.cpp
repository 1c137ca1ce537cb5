// The host side of ch05:file_to_gpu and of the disk_read ceiling, on real files in a temporary folder:
// the pattern and its file, the seed's range, the O_DIRECT chunk arithmetic and reads (tail included),
// step 02's double-buffer schedule, the page-cache drop and its check, and the disk probe end to end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chapters/ch05_storage/file_to_gpu/host_io.hpp"
#include "chapters/ch05_storage/file_to_gpu/reference.hpp"
#include "core/ceilings/disk_read.hpp"
#include "core/base/error.hpp"

namespace {

using namespace aisp;
using namespace aisp::ch05::file_to_gpu;
namespace fs = std::filesystem;

// A fresh folder per test, removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : m_path(fs::temp_directory_path() / ("aisp_ch05_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(m_path);
    fs::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::string str() const { return m_path.string(); }

 private:
  fs::path m_path;
};

std::vector<std::uint8_t> pattern(std::uint64_t first, std::size_t count, std::uint64_t key) {
  std::vector<std::uint8_t> v(count);
  fill_pattern_bytes(v.data(), count, first, key);
  return v;
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FileToGpuPattern, BytesAreTheLittleEndianBytesOfTheWords) {
  for (const std::uint64_t p : {0ull, 1ull, 2ull, 3ull, 4097ull, (1ull << 33) + 6}) {
    const std::uint32_t w = pattern_file_word(p / 4, k_file_key);
    EXPECT_EQ(pattern_file_byte(p, k_file_key), static_cast<std::uint8_t>(w >> (8 * (p % 4)))) << p;
  }
  // Any start, any length: the fast word path agrees with the byte formula.
  for (const std::uint64_t first : {0ull, 1ull, 3ull, 4096ull, 12345ull}) {
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{4099}}) {
      const auto v = pattern(first, count, k_file_key);
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], pattern_file_byte(first + i, k_file_key)) << first;
    }
  }
  // The pattern is not trivially periodic or constant: a misplaced chunk would show.
  EXPECT_NE(pattern(0, 4096, k_file_key), pattern(4096, 4096, k_file_key));
  EXPECT_NE(pattern(0, 64, k_file_key), pattern(0, 64, k_file_key + 1));
  const auto v = pattern(0, 1 << 16, k_file_key);
  EXPECT_GT(std::set<std::uint8_t>(v.begin(), v.end()).size(), 250u);
}

TEST(FileToGpuFile, IsWrittenOnceWithThePatternAndRewrittenWhenWrong) {
  const TempDir dir("file");
  const std::string path = dir.file("sub/test.bin");  // the folder is created too
  const std::uint64_t bytes = (std::uint64_t{1} << 20) + 1234;  // a partial last page
  ensure_pattern_file(path, bytes, k_file_key, 0);
  EXPECT_EQ(read_all(path), pattern(0, bytes, k_file_key));
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid()))) << "the temporary was renamed";

  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  ensure_pattern_file(path, bytes, k_file_key, 0);
  struct stat again {};
  ASSERT_EQ(::stat(path.c_str(), &again), 0);
  EXPECT_EQ(before.st_ino, again.st_ino) << "a good file is kept, not rewritten";

  {  // the last byte damaged: rewritten
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(bytes - 1));
    const char bad = static_cast<char>(pattern_file_byte(bytes - 1, k_file_key) ^ 0x5A);
    f.write(&bad, 1);
  }
  ensure_pattern_file(path, bytes, k_file_key, 0);
  EXPECT_EQ(read_all(path), pattern(0, bytes, k_file_key));

  ensure_pattern_file(path, bytes + 4096, k_file_key, 0);  // another size: rewritten at that size
  EXPECT_EQ(fs::file_size(path), bytes + 4096);
}

TEST(FileToGpuFile, RefusesWhenTheDiskLacksTheSpace) {
  const TempDir dir("space");
  try {
    ensure_pattern_file(dir.file("big.bin"), 4096, k_file_key, std::uint64_t{1} << 62);
    FAIL() << "no error for a margin larger than any disk";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("AISP_CACHE_DIR"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("big.bin")));
}

TEST(FileToGpuRange, SeedOffsetsAreAlignedInsideTheFileAndDifferForTheGateSeeds) {
  const std::uint64_t sizes[] = {(std::uint64_t{3} << 20) + 8315, std::uint64_t{1} << 30, std::uint64_t{4} << 30, 1};
  for (const std::uint64_t bytes : sizes) {
    EXPECT_EQ(file_bytes_for(bytes) % k_direct_io_align, 0u);
    EXPECT_LE(slack_bytes(bytes), std::uint64_t{64} << 20);
    std::set<std::uint64_t> seen;
    for (std::uint64_t seed = 0; seed < 2000; ++seed) {
      const std::uint64_t off = seed_offset(seed, bytes);
      ASSERT_EQ(off % k_direct_io_align, 0u);
      // The range, rounded up for O_DIRECT, never runs past the end of the file.
      ASSERT_LE(off + round_up_to(bytes, k_direct_io_align), file_bytes_for(bytes)) << bytes << " seed " << seed;
      seen.insert(off);
    }
    EXPECT_GT(seen.size(), bytes == 1 ? 1u : 100u) << "seeds spread over the slack";
    // The harness's two validation seeds (device/harness.hpp) must read different bytes.
    EXPECT_NE(seed_offset(0x243F6A88ULL, bytes), seed_offset(0x85A308D3ULL, bytes)) << bytes;
  }
}

TEST(FileToGpuRange, ColdSamplesWalkTheFileInsideIt) {
  for (const std::uint64_t bytes : {(std::uint64_t{3} << 20) + 8315, std::uint64_t{1} << 30, std::uint64_t{1}}) {
    const std::uint64_t span = round_up_to(bytes, k_direct_io_align);
    std::uint64_t off = seed_offset(0x243F6A88ULL, bytes);
    std::set<std::uint64_t> seen;
    for (int k = 0; k < 5000; ++k) {
      const std::uint64_t next = next_sample_offset(off, bytes);
      ASSERT_EQ(next % k_direct_io_align, 0u);
      ASSERT_LE(next + span, file_bytes_for(bytes)) << bytes << " sample " << k;
      ASSERT_NE(next, off) << bytes << ": a sample must not read its predecessor's range again";
      seen.insert(next);
      off = next;
    }
    EXPECT_GT(seen.size(), 1000u) << bytes;
  }
  // Small ranges: consecutive samples never touch, a gap of at least k_sample_gap_bytes between them
  // (readahead below the page cache must not serve the next sample), and 5 in a row are pairwise disjoint.
  for (const std::uint64_t bytes : {std::uint64_t{4096}, (std::uint64_t{3} << 20) + 8315, std::uint64_t{16} << 20}) {
    const std::uint64_t span = round_up_to(bytes, k_direct_io_align);
    std::uint64_t off = 0;
    std::vector<std::uint64_t> starts;
    for (int k = 0; k < 200; ++k) {
      const std::uint64_t next = next_sample_offset(off, bytes);
      const auto at = static_cast<std::int64_t>(next), was = static_cast<std::int64_t>(off);
      const std::int64_t gap = at > was ? at - (was + static_cast<std::int64_t>(span))
                                        : was - (at + static_cast<std::int64_t>(span));
      EXPECT_GE(gap, static_cast<std::int64_t>(k_sample_gap_bytes)) << bytes << ": sample " << k << " reads too close to the one before";
      starts.push_back(off = next);
    }
    if (bytes > (std::uint64_t{4} << 20)) continue;  // 16 MiB: 3 ranges and gaps fill the slack
    for (std::size_t i = 0; i + 4 < starts.size(); ++i) {
      for (std::size_t j = i + 1; j <= i + 4; ++j) {
        EXPECT_TRUE(starts[i] + span <= starts[j] || starts[j] + span <= starts[i])
            << bytes << ": samples " << i << " and " << j << " overlap";
      }
    }
  }
}

TEST(FileToGpuChunks, CoverTheRangeWithAlignedRequests) {
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{4096}, std::size_t{4097}, (std::size_t{3} << 20) + 8315,
                                  std::size_t{16} << 20}) {
    for (const std::size_t chunk : {std::size_t{4096}, std::size_t{1} << 20, std::size_t{16} << 20}) {
      const auto plan = plan_chunks(bytes, chunk);
      ASSERT_EQ(plan.size(), (bytes + chunk - 1) / chunk);
      std::size_t next = 0;
      for (const Chunk& c : plan) {
        EXPECT_EQ(c.first, next);
        EXPECT_EQ(c.first % k_direct_io_align, 0u) << "every chunk starts aligned";
        EXPECT_GT(c.length, 0u);
        EXPECT_LE(c.length, chunk);
        EXPECT_EQ(c.request % k_direct_io_align, 0u);
        EXPECT_GE(c.request, c.length);
        EXPECT_LT(c.request - c.length, k_direct_io_align);
        EXPECT_LE(c.request, chunk) << "the request fits the staging buffer";
        next += c.length;
      }
      EXPECT_EQ(next, bytes);
    }
  }
  EXPECT_TRUE(plan_chunks(0, 4096).empty());
}

// Plays step 02's schedule against a model of the two staging slots: a copy queued from a slot keeps
// it busy until a wait on the slot's event (recorded after that copy) returns.
TEST(FileToGpuSchedule, NeverOverwritesASlotInFlightAndOverlapsReadWithCopy) {
  for (const std::size_t chunks : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{8}}) {
    const auto s = double_buffer_schedule(chunks);
    bool in_flight[2] = {true, true};  // a previous launch may have left a copy in either slot
    bool recorded_since_copy[2] = {true, true};
    long held[2] = {-1, -1};  // the chunk read into the slot and not yet copied
    std::vector<int> reads(chunks), copies(chunks);
    for (std::size_t k = 0; k < s.size(); ++k) {
      const IoStep& st = s[k];
      ASSERT_TRUE(st.slot == 0 || st.slot == 1);
      switch (st.op) {
        case IoOp::wait_slot:
          if (recorded_since_copy[st.slot]) in_flight[st.slot] = false;
          break;
        case IoOp::read:
          ASSERT_FALSE(in_flight[st.slot]) << "chunk " << st.chunk << " read into a slot still being copied";
          ASSERT_EQ(held[st.slot], -1) << "a read chunk was never copied";
          held[st.slot] = static_cast<long>(st.chunk);
          ++reads[st.chunk];
          break;
        case IoOp::copy:
          ASSERT_EQ(held[st.slot], static_cast<long>(st.chunk)) << "copied from the wrong slot";
          held[st.slot] = -1;
          in_flight[st.slot] = true;
          recorded_since_copy[st.slot] = false;
          ++copies[st.chunk];
          // Overlap: before anything waits for this copy, the host reads the next chunk.
          if (st.chunk + 1 < chunks) {
            for (std::size_t j = k + 1; j < s.size(); ++j) {
              if (s[j].op == IoOp::wait_slot && s[j].slot == st.slot) FAIL() << "waited before reading ahead";
              if (s[j].op == IoOp::read) {
                EXPECT_EQ(s[j].chunk, st.chunk + 1);
                break;
              }
            }
          }
          break;
        case IoOp::record_slot:
          recorded_since_copy[st.slot] = true;
          break;
      }
    }
    for (std::size_t i = 0; i < chunks; ++i) {
      EXPECT_EQ(reads[i], 1) << i;
      EXPECT_EQ(copies[i], 1) << i;
    }
    // Every copy is followed by its record: the next launch's first wait on the slot covers it.
    EXPECT_TRUE(recorded_since_copy[0] && recorded_since_copy[1]);
  }
}

TEST(FileToGpuRead, PlainAndDirectReadsReturnTheRangeWithItsTail) {
  const TempDir dir("read");
  const std::uint64_t bytes = (std::uint64_t{3} << 20) + 8315;
  const std::string path = dir.file("range.bin");
  ensure_pattern_file(path, file_bytes_for(bytes), k_file_key, 0);
  const std::uint64_t offset = seed_offset(0x85A308D3ULL, bytes);
  const auto want = pattern(offset, bytes, k_file_key);

  const int plain = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(plain, 0);
  std::vector<std::uint8_t> got(bytes);
  pread_exactly(plain, got.data(), bytes, offset);
  EXPECT_EQ(got, want);
  EXPECT_THROW(pread_exactly(plain, got.data(), 8192, file_bytes_for(bytes) - 4096), DataError) << "past the end";
  ::close(plain);

  std::string why;
  const int direct = open_direct(path, why);
  if (direct < 0) {
    EXPECT_NE(why.find("O_DIRECT"), std::string::npos) << why;
    GTEST_SKIP() << why;
  }
  EXPECT_TRUE(why.empty());
  // Step 02's loop, one staging buffer: every chunk lands where it belongs, the tail included.
  const std::size_t chunk = std::size_t{1} << 20;
  std::vector<std::uint8_t> staging_storage(chunk + k_direct_io_align);
  std::uint8_t* staging = align_up(staging_storage.data());
  std::vector<std::uint8_t> out(bytes, 0xEE);
  for (const Chunk& c : plan_chunks(bytes, chunk)) {
    pread_direct(direct, staging, c.length, c.request, offset + c.first);
    std::copy(staging, staging + c.length, out.begin() + static_cast<std::ptrdiff_t>(c.first));
  }
  EXPECT_EQ(out, want);
  // What the kernel would refuse is refused before it is asked.
  EXPECT_THROW(pread_direct(direct, staging, 100, 4096, offset + 512), DataError);
  EXPECT_THROW(pread_direct(direct, staging + 1, 100, 4096, offset), DataError);
  EXPECT_THROW(pread_direct(direct, staging, 5000, 4096, offset), DataError);
  ::close(direct);
}

TEST(FileToGpuPageCache, DropIsCheckedWithMincore) {
  const TempDir dir("cache");
  const std::string path = dir.file("cached.bin");
  ensure_pattern_file(path, std::uint64_t{4} << 20, k_file_key, 0);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<std::uint8_t> buf(std::size_t{4} << 20);
  pread_exactly(fd, buf.data(), buf.size(), 0);
  ::close(fd);
  EXPECT_GT(page_cache_resident_fraction(path), 0.5) << "a file just read is in the page cache";
  const double after = drop_from_page_cache(path);
  ASSERT_GE(after, 0.0);
  ASSERT_LE(after, 1.0);
  if (file_system_name(path) == "tmpfs") {
    EXPECT_GT(after, 0.5) << "tmpfs pages are the file: nothing to drop, and the check says so";
  } else {
    EXPECT_LT(after, 0.01) << file_system_name(path) << ": clean pages of an unmapped file are dropped";
  }
  EXPECT_EQ(page_cache_resident_fraction(dir.file("missing.bin")), -1);
}

// A cold sample cares about the range it reads: residency is asked of that range, and a range the
// process read is told apart from one it did not.
TEST(FileToGpuPageCache, ResidencyOfARange) {
  const TempDir dir("range");
  const std::string path = dir.file("ranged.bin");
  const std::uint64_t mib = std::uint64_t{1} << 20;
  ensure_pattern_file(path, 8 * mib, k_file_key, 0);
  if (file_system_name(path) == "tmpfs") GTEST_SKIP() << "tmpfs: the pages are the file, nothing is ever dropped";
  ASSERT_LT(drop_from_page_cache(path), 0.01);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<std::uint8_t> buf(2 * mib);
  pread_exactly(fd, buf.data(), buf.size(), 4 * mib);  // the third quarter, and maybe readahead after it
  ::close(fd);
  EXPECT_GT(page_cache_resident_fraction(path, 4 * mib, 2 * mib), 0.9) << "the range just read";
  EXPECT_LT(page_cache_resident_fraction(path, 0, 2 * mib), 0.01) << "a range before it, never read";
  EXPECT_EQ(page_cache_resident_fraction(path, 9 * mib, mib), 0) << "past the end: no page";
  // An unaligned offset counts the page it falls in.
  EXPECT_GT(page_cache_resident_fraction(path, 4 * mib + 100, 4096), 0.9);
  EXPECT_LT(drop_from_page_cache(path, 4 * mib, 2 * mib), 0.01);
}

TEST(FileToGpuCacheDir, FollowsTheEnvironment) {
  const auto saved = [](const char* n) -> std::optional<std::string> {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto a = saved("AISP_CACHE_DIR"), x = saved("XDG_CACHE_HOME"), h = saved("HOME");
  ::setenv("AISP_CACHE_DIR", "/data/aisp", 1);
  EXPECT_EQ(aisp_cache_dir(), "/data/aisp");
  ::unsetenv("AISP_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(aisp_cache_dir(), "/x/cache/aisp");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(aisp_cache_dir(), "/home/u/.cache/aisp");
  const auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v) {
      ::setenv(n, v->c_str(), 1);
    } else {
      ::unsetenv(n);
    }
  };
  restore("AISP_CACHE_DIR", a);
  restore("XDG_CACHE_HOME", x);
  restore("HOME", h);
}

TEST(DiskReadProbe, Arithmetic) {
  EXPECT_DOUBLE_EQ(gb_per_s(2e9, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(gb_per_s(double(1 << 30), 0.5), 2.147483648);
  EXPECT_EQ(gb_per_s(1e9, 0), 0);
  EXPECT_EQ(round_up_to(4097, 4096), 8192u);
  EXPECT_EQ(round_up_to(4096, 4096), 4096u);
  EXPECT_EQ(round_down_to(8191, 4096), 4096u);
  DiskReadOptions bad;
  bad.block_bytes = 1000;
  EXPECT_THROW(measure_disk_read(bad), UsageError);
}

TEST(DiskReadProbe, MeasuresASmallFileOrSaysWhyNot) {
  const TempDir dir("probe");
  DiskReadOptions o;
  o.dir = dir.str();
  o.file_bytes = (std::uint64_t{8} << 20) + 4096 * 3 + 100;  // a short last block
  o.block_bytes = std::size_t{1} << 20;
  o.threads = {1, 3};
  o.min_passes = 3;
  const DiskReadResult r = measure_disk_read(o);
  if (!r.skipped.empty()) {
    EXPECT_NE(r.skipped.find("O_DIRECT"), std::string::npos) << r.skipped;
    EXPECT_EQ(r.gb_per_s, 0);
  } else {
    EXPECT_GT(r.gb_per_s, 0);
    EXPECT_EQ(r.samples, 3u);
    EXPECT_NE(r.method.find("O_DIRECT"), std::string::npos) << r.method;
    EXPECT_NE(r.method.find(dir.str()), std::string::npos) << "the method names where it read";
    EXPECT_NE(r.note.find("GB/s with"), std::string::npos) << "the other method's rate: " << r.note;
  }
  EXPECT_TRUE(fs::is_empty(dir.str())) << "the probe file is removed";
}

TEST(DiskReadProbe, RefusesToCallMemoryADisk) {
  if (!fs::exists("/dev/shm") || file_system_name("/dev/shm") != "tmpfs") GTEST_SKIP() << "no tmpfs at /dev/shm";
  const std::string dir = "/dev/shm/aisp_ch05_probe_" + std::to_string(::getpid());
  DiskReadOptions o;
  o.dir = dir;
  o.file_bytes = std::uint64_t{1} << 20;
  o.block_bytes = std::size_t{1} << 20;
  o.min_passes = 2;
  const DiskReadResult r = measure_disk_read(o);
  fs::remove_all(dir);
  EXPECT_NE(r.skipped.find("tmpfs"), std::string::npos) << "measured " << r.gb_per_s << " GB/s: " << r.method;
  EXPECT_EQ(r.gb_per_s, 0);
}

}  // namespace
