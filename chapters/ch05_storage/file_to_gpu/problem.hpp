// ch05:file_to_gpu — the contract of the storage ladder: read `bytes` bytes of a file on the local disk
// into device memory (a checkpoint shard, a dataset shard, a KV-cache spill coming back).
//
// The file: written once per size under aisp_cache_dir()/ch05 ($AISP_CACHE_DIR, else ~/.cache/aisp),
// flushed to the disk, and reused by later runs. Its bytes are a counter-based pattern of their position
// (core/ceilings/disk_read.hpp), so the reference is computed on the device from the position alone, without
// reading the file: the trusted path and the measured one share nothing but the formula. The file
// holds the range plus 64 MiB of slack; each seed reads the range that starts at its own
// 4 KiB-aligned offset (reference.hpp), so the two seeds of the gate see different bytes and a variant
// that cached its answer fails, while nothing is rewritten between seeds. Cold timed samples move on
// through the file, a range per sample (prepare_sample, next_sample_offset).
//
// Every step reads the same range and writes the same `bytes` to the same device buffer; they differ in
// how the bytes get there: read() into pageable memory and one copy (01), O_DIRECT reads into two pinned
// staging buffers whose copies overlap the next read (02), cuFile / GPUDirect Storage (03, SKIPPED where
// libcufile or its driver is missing).
//
// The page cache (axis `page_cache`). 0, cold (default): before every timed sample, outside the timed
// interval, the file's pages are dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED)
// (prepare_sample). That is a request, not a guarantee (pages that another process maps or locks stay),
// so it is checked: mincore() on a mapping of the file must then show under 1% of its pages resident,
// or the sample is an error rather than a disk number that was really a memory copy. Without root the
// drive's own cache cannot be dropped; a RAM-backed virtual disk would be measured as it is. 1, hot:
// the range is read into the page cache in generate() and left there: step 01's read() is then a
// memory copy, while step 02's O_DIRECT reads still go to the disk (the lesson: O_DIRECT loses when the
// data is already in memory).
//
// Clock: wall (cold). Host I/O is the subject: read() and pread() block the calling thread and never
// appear on a CUDA stream, so the GPU's events cannot see them. The window runs from the call of
// launch() to the end of the harness's stream synchronize: the reads, the copies and their overlap.
//
// Declared work: `bytes` read from the disk and moved across PCIe. The bound is the slower of the two
// measured ceilings; with the file on one NVMe drive (a few GB/s) against a PCIe Gen5 x16 link (~50
// GB/s) that is the disk: placed against `disk_read` (`aisp hw peaks`: O_DIRECT reads of a 1 GiB file
// in the same directory). Hot, the disk is out of the path and the link binds: `h2d_pinned`.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/ch05_storage/file_to_gpu/host_io.hpp"
#include "chapters/ch05_storage/file_to_gpu/reference.hpp"
#include "core/ceilings/disk_read.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch05::file_to_gpu {

// What every variant's launch receives. `dst` holds garbage (the gate poisons it) until the variant has
// moved the range into it. Variants open their own descriptor of `path` in setup() (how it is opened,
// O_DIRECT or not, is part of their idea) and only ever read it.
struct Args {
  const char* path;      // the test file
  std::uint64_t offset;  // the range's first byte in the file: a multiple of k_direct_io_align (per seed)
  std::uint8_t* dst;     // `bytes` bytes of device memory
  std::size_t bytes;
  std::size_t chunk;     // staging buffer of step 02: a multiple of k_direct_io_align
};

// The trusted device reference (device_reference.cu): out[i] = pattern_file_byte(first + i, key).
void pattern_bytes_on_device(std::uint8_t* out, std::size_t count, std::uint64_t first, std::uint64_t key,
                             cudaStream_t stream);

// Above this resident fraction after the drop, a cold sample would not be cold.
inline constexpr double k_max_cold_resident = 0.01;

class FileToGpuProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch05",
            .ladder = "file_to_gpu",
            .summary = "read a file into device memory: read() + pageable copy -> O_DIRECT into two pinned "
                       "buffers, copies overlapped -> cuFile; bound: measured disk_read",
            .axes = {{.name = "bytes", .default_value = std::int64_t{1} << 30,
                      .help = "bytes read into the GPU (the file holds up to 64 MiB more; default 1 GiB)",
                      // Not a multiple of 4 KiB nor of the test chunk: the O_DIRECT tail is exercised.
                      // One size by default: 4 GiB (a ~3 s sample on a virtual disk of ~1.5 GB/s) was still
                      // NOISY (+-5% to +-7%) after 40 s of samples per step on an nvidia-h200 host, where
                      // 1 GiB narrowed to +-2.4% (README); `--axis bytes=4Gi --max-time 120` for that size.
                      .test_value = (std::int64_t{3} << 20) + 8315},
                     {.name = "chunk", .default_value = std::int64_t{16} << 20,
                      .help = "step 02's staging buffer in bytes, a multiple of 4096 (default 16 MiB)",
                      .min_value = 4096,
                      .test_value = std::int64_t{1} << 20},
                     {.name = "page_cache", .default_value = 0,
                      .help = "0: the file's pages dropped before every sample (cold disk); 1: left in memory",
                      .min_value = 0}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::cold,
            // Samples of 0.6-0.8 s from a disk whose rate wanders: 40 s narrowed 1 GiB to +-2.4% on an
            // nvidia-h200 host where the default 5 s left +-11% (README, "Measurement notes").
            .sampling_budget_s = 40};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const auto bytes = static_cast<std::uint64_t>(axes.at("bytes"));
    const auto chunk = static_cast<std::uint64_t>(axes.at("chunk"));
    const std::int64_t page_cache = axes.at("page_cache");
    if (chunk % k_direct_io_align != 0 || chunk > (std::uint64_t{1} << 30)) {
      throw UsageError("ch05:file_to_gpu: chunk must be a multiple of 4096 bytes, at most 1 GiB");
    }
    if (page_cache > 1) throw UsageError("ch05:file_to_gpu: page_cache is 0 (cold) or 1 (hot)");
    m_hot = page_cache == 1;
    const std::uint64_t file_bytes = file_bytes_for(bytes);
    m_path = (std::filesystem::path(aisp_cache_dir()) / "ch05" /
              ("file_to_gpu_" + std::to_string(file_bytes) + ".bin"))
                 .string();
    ensure_pattern_file(m_path, file_bytes, k_file_key);
    m_out = DeviceBuffer<std::uint8_t>(bytes);
    m_ref = DeviceBuffer<std::uint8_t>(bytes);
    m_args = {m_path.c_str(), 0, m_out.data(), static_cast<std::size_t>(bytes), static_cast<std::size_t>(chunk)};
  }

  // The seed picks the range; the reference is its pattern, computed on the device. Hot: the range is
  // read into the page cache here (a plain read, the way any earlier reader would have left it).
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    m_args.offset = seed_offset(seed, m_args.bytes);
    pattern_bytes_on_device(m_ref.data(), m_args.bytes, m_args.offset, k_file_key, stream);
    if (m_hot) {
      warm_page_cache();
    } else {
      drop_from_page_cache(m_path, m_args.offset, m_args.bytes);
    }
  }

  std::vector<TensorView> inputs() const override { return {}; }  // the file: variants open it read-only
  std::vector<TensorView> outputs() const override {
    return {{"data", m_out.data(), m_args.bytes, DType::u8}};
  }
  std::vector<TensorView> references() const override {
    return {{"data_ref", m_ref.data(), m_args.bytes, DType::u8}};
  }

  // Exact: bytes are moved, never computed.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double b = static_cast<double>(m_args.bytes);
    return {.bytes = b, .flops = 0, .bytes_read = b, .bytes_written = 0, .ceiling = m_hot ? "h2d_pinned" : "disk_read"};
  }

  Args args() const override { return m_args; }

  // Cold: every sample reads the next range of the file (next_sample_offset: not one a cache below the
  // page cache kept from the previous sample), its reference computed again on the device, and the
  // file's pages leave the page cache, which is checked. All before the window opens.
  bool prepare_sample() override {
    if (m_hot) return false;
    m_args.offset = next_sample_offset(m_args.offset, m_args.bytes);
    pattern_bytes_on_device(m_ref.data(), m_args.bytes, m_args.offset, k_file_key, nullptr);
    AISP_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // done before the harness masks it again
    // What counts is the range this sample reads: a page elsewhere in the file that the kernel kept is
    // never read by it.
    const double resident = drop_from_page_cache(m_path, m_args.offset, m_args.bytes);
    if (resident > k_max_cold_resident) {
      throw std::runtime_error("ch05:file_to_gpu: " + std::to_string(100 * resident) +
                               "% of the range a sample reads stayed in the page cache after POSIX_FADV_DONTNEED "
                               "(mapped or locked by another process?): a cold sample would read memory, not the "
                               "disk");
    }
    return true;  // a new reference
  }

  bool has_host_reference() const override { return true; }
  // The host recomputes the pattern of the range and checks it against both the device reference and
  // the file itself (read back with plain pread): the formula, the kernel and the written file agree.
  std::string check_reference_on_host(cudaStream_t stream) override {
    std::vector<std::uint8_t> want(m_args.bytes), file(m_args.bytes);
    fill_pattern_bytes(want.data(), want.size(), m_args.offset, k_file_key);
    const std::vector<double> want_d(want.begin(), want.end());
    std::string why = compare_on_host("data_ref", to_host(references().front(), stream), want_d, {0.0, 0.0});
    if (!why.empty()) return why;
    const int fd = ::open(m_path.c_str(), O_RDONLY);
    if (fd < 0) return "cannot open " + m_path;
    try {
      pread_exactly(fd, file.data(), file.size(), m_args.offset);
    } catch (const std::exception& e) {
      ::close(fd);
      return e.what();
    }
    ::close(fd);
    return compare_on_host("file", std::vector<double>(file.begin(), file.end()), want_d, {0.0, 0.0});
  }

 private:
  void warm_page_cache() const {
    const int fd = ::open(m_path.c_str(), O_RDONLY);
    if (fd < 0) throw DataError("cannot open " + m_path);
    std::vector<std::uint8_t> scratch(std::size_t{16} << 20);
    try {
      for (std::size_t at = 0; at < m_args.bytes; at += scratch.size()) {
        pread_exactly(fd, scratch.data(), std::min(scratch.size(), m_args.bytes - at), m_args.offset + at);
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }

  Args m_args{};
  bool m_hot = false;
  std::string m_path;
  DeviceBuffer<std::uint8_t> m_out, m_ref;
};

}  // namespace aisp::ch05::file_to_gpu
