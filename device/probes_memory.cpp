// Memory ceilings: DRAM read, write and copy, L2 and shared-memory bandwidth (docs/ceilings.md).
#include <algorithm>
#include <fmt/format.h>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes_internal.hpp"

namespace aisp::probe {

namespace {

constexpr std::uint32_t k_src_seed = 0x2545F491u;
constexpr std::uint32_t k_write_seed = 0x6C078965u;
constexpr int k_memset_byte = 0x5A;  // never the poison (0xFF)
constexpr const char* k_bus = "memory bus width x 2 transfers per memory clock";

std::string hex_mismatch(std::uint64_t got, std::uint64_t want) {
  if (got == want) return "";
  return fmt::format("checksum {:#018x}, expected {:#018x}", got, want);
}

// Upper bounds from the device's attributes: a probe faster than these did not do its loads (the compiler
// removed them, or the timing is wrong), and is an error, not a ceiling.
double dram_bound_gb_s(const DeviceFacts& d) {
  // Double data rate: two transfers per memory clock over the whole bus.
  return 2.0 * d.mem_clock_khz * 1e3 * d.mem_bus_width_bits / 8 * 1e-9;
}

double sm_port_bound_gb_s(const DeviceFacts& d) { return 128.0 * d.sm_count * d.sm_clock_khz * 1e3 * 1e-9; }

void check_bound(const char* what, double gb_s, double bound, const char* why) {
  if (bound > 0 && gb_s > 1.02 * bound) {
    throw ProbeError(fmt::format("{}: {:.0f} GB/s is above what the hardware can deliver ({:.0f} GB/s: {}); the "
                                 "probe did not do its loads",
                                 what, gb_s, bound, why));
  }
}

// The faster of two methods, with the other one's number kept in the note.
CeilingEntry best_of(std::string name, double a_gb_s, std::string a_method, std::size_t a_samples, double b_gb_s,
                     std::string b_method, std::size_t b_samples) {
  const bool a_wins = a_gb_s >= b_gb_s;
  CeilingEntry e = entry(std::move(name), "dram", k_unit_gb_s, a_wins ? a_gb_s : b_gb_s,
                         a_wins ? a_method : b_method, a_wins ? a_samples : b_samples);
  e.note = fmt::format("also measured: {} {:.0f} GB/s; the ceiling is the faster method", a_wins ? b_method : a_method,
                       a_wins ? b_gb_s : a_gb_s);
  return e;
}

}  // namespace

void probe_dram(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  const DeviceFacts& d = ctx.facts();
  const cudaStream_t s = ctx.stream();
  // 4 GiB per buffer, as ch07:copy moves by default; less on a small GPU, but always far past the L2.
  std::size_t bytes = std::min<std::size_t>(std::size_t{4} << 30, static_cast<std::size_t>(d.global_mem_bytes) / 6);
  bytes -= bytes % (std::size_t{1} << 20);
  if (bytes < 8 * static_cast<std::size_t>(d.l2_bytes)) {
    for (const auto& n : wanted) {
      out.entries.push_back(skipped_entry(n, "dram", k_unit_gb_s, "too little device memory for buffers of 8x the L2"));
    }
    return;
  }
  const std::size_t n = bytes / 4;
  DeviceBuffer<std::uint32_t> src(n), dst(n);
  DeviceBuffer<unsigned long long> partials(static_cast<std::size_t>(checksum_blocks(d)));
  launch_pattern(src.data(), n, k_src_seed, d, s);
  AISP_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::uint64_t want_src = expected_checksum(n, k_src_seed);
  const auto checksum_of = [&](const std::uint32_t* p) {
    launch_checksum(p, n, partials.data(), d, s);
    return read_partials(partials.data(), checksum_blocks(d), s);
  };
  const auto poison_dst = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(dst.data(), 0xFF, bytes, s)); };
  SampleTimer& timer = ctx.cold();
  const std::string size = gib(static_cast<double>(bytes));

  if (wants(wanted, "dram_read")) {
    record(out, "dram_read", [&] {
      Steps st;
      st.launch = [&] { launch_checksum(src.data(), n, partials.data(), d, s); };
      st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(partials.data(), 0xFF, partials.bytes(), s)); };
      st.check = [&] { return hex_mismatch(read_partials(partials.data(), checksum_blocks(d), s), want_src); };
      const Timing t = run_steps(timer, s, st, "dram_read");
      check_bound("dram_read", static_cast<double>(bytes) / t.median_s * 1e-9, dram_bound_gb_s(d), k_bus);
      return entry("dram_read", "dram", k_unit_gb_s, static_cast<double>(bytes) / t.median_s * 1e-9,
                   fmt::format("checksum kernel: 16-byte loads, 4 in flight per thread, one full wave; {} read, "
                               "L2 flushed before each sample",
                               size),
                   t.samples);
    });
  }
  if (wants(wanted, "dram_write")) {
    record(out, "dram_write", [&] {
      const std::uint64_t want_pattern = expected_checksum(n, k_write_seed);
      Steps k;
      k.launch = [&] { launch_pattern(dst.data(), n, k_write_seed, d, s); };
      k.prepare = poison_dst;
      k.check = [&] { return hex_mismatch(checksum_of(dst.data()), want_pattern); };
      const Timing tk = run_steps(timer, s, k, "dram_write (kernel)");
      // sum_i c * (2i + 1) = c * n^2 for a constant word c.
      const std::uint64_t word = 0x01010101u * k_memset_byte;
      const std::uint64_t want_memset = word * (static_cast<std::uint64_t>(n) * n);
      Steps m;
      m.launch = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(dst.data(), k_memset_byte, bytes, s)); };
      m.prepare = poison_dst;
      m.check = [&] { return hex_mismatch(checksum_of(dst.data()), want_memset); };
      const Timing tm = run_steps(timer, s, m, "dram_write (cudaMemsetAsync)");
      const double b = static_cast<double>(bytes);
      CeilingEntry e = best_of("dram_write", b / tk.median_s * 1e-9,
                     fmt::format("pattern kernel: 16-byte stores, one full wave; {} written", size), tk.samples,
                     b / tm.median_s * 1e-9, fmt::format("cudaMemsetAsync of {}", size), tm.samples);
      check_bound("dram_write", e.value, dram_bound_gb_s(d), k_bus);
      return e;
    });
  }
  if (wants(wanted, "dram_copy")) {
    record(out, "dram_copy", [&] {
      Steps m;
      m.launch = [&] { AISP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s)); };
      m.prepare = poison_dst;
      m.check = [&] { return hex_mismatch(checksum_of(dst.data()), want_src); };
      const Timing tm = run_steps(timer, s, m, "dram_copy (cudaMemcpyAsync)");
      Steps k = m;
      k.launch = [&] { launch_copy(src.data(), dst.data(), n, d, s); };
      const Timing tk = run_steps(timer, s, k, "dram_copy (kernel)");
      const double moved = 2.0 * static_cast<double>(bytes);  // every byte read once and written once
      CeilingEntry e = best_of("dram_copy", moved / tm.median_s * 1e-9,
                     fmt::format("cudaMemcpyAsync device to device, {} -> {}, bytes read + written", size, size),
                     tm.samples, moved / tk.median_s * 1e-9,
                     fmt::format("copy kernel (16-byte words, 4 loads in flight), {} -> {}, bytes read + written",
                                 size, size),
                     tk.samples);
      check_bound("dram_copy", e.value, dram_bound_gb_s(d), k_bus);
      return e;
    });
  }
}

void probe_l2(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  if (!wants(wanted, "l2_read")) return;
  const DeviceFacts& d = ctx.facts();
  const cudaStream_t s = ctx.stream();
  const std::size_t n = l2_probe_words(d);
  const double set_bytes = 4.0 * static_cast<double>(n);
  const double pass_bytes = 16.0 * static_cast<double>(l2_window_vectors(d));
  record(out, "l2_read", [&] {
    DeviceBuffer<std::uint32_t> buf(n);
    DeviceBuffer<unsigned long long> partials(static_cast<std::size_t>(full_wave_blocks(d, 256)));
    launch_pattern(buf.data(), n, k_src_seed, d, s);
    // About a millisecond per launch at ~10 TB/s, so that launch overhead is noise.
    const int passes = std::max(16, static_cast<int>(1e10 / pass_bytes));
    // Whole 512-byte lines per warp: the window moves by a multiple of 32 vectors.
    const unsigned step = 32u * 1237u;
    const std::uint64_t want = expected_l2_sum(n, k_src_seed, l2_window_vectors(d), step, passes);
    Steps st;
    st.launch = [&] { launch_l2_read(buf.data(), n, step, passes, partials.data(), d, s); };
    st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(partials.data(), 0xFF, partials.bytes(), s)); };
    st.check = [&] { return hex_mismatch(read_partials(partials.data(), static_cast<int>(partials.size()), s), want); };
    const Timing t = run_steps(ctx.hot(), s, st, "l2_read");
    const double gb_s = pass_bytes * passes / t.median_s * 1e-9;
    check_bound("l2_read", gb_s, sm_port_bound_gb_s(d), "128 bytes per clock per SM at the peak SM clock");
    return entry("l2_read", "l2", k_unit_gb_s, gb_s,
                 fmt::format("ld.global.cg (L2 only, not L1): {} passes per launch of a {} window moving through a "
                             "{} working set ({:.0f}% of the L2), one full wave, 4 loads in flight per thread",
                             passes, gib(pass_bytes), gib(set_bytes), 100 * set_bytes / static_cast<double>(d.l2_bytes)),
                 t.samples);
  });
}

void probe_smem(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  if (!wants(wanted, "smem_read")) return;
  const DeviceFacts& d = ctx.facts();
  const cudaStream_t s = ctx.stream();
  record(out, "smem_read", [&] {
    const int blocks = smem_blocks(d);
    constexpr int rounds = 8192;
    DeviceBuffer<unsigned long long> partials(static_cast<std::size_t>(blocks));
    const std::uint64_t want = expected_smem_partial(k_src_seed, rounds);
    Steps st;
    st.launch = [&] { launch_smem_read(k_src_seed, rounds, partials.data(), d, s); };
    st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(partials.data(), 0xFF, partials.bytes(), s)); };
    st.check = [&]() -> std::string {
      std::vector<unsigned long long> host(partials.size());
      AISP_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials.data(), partials.bytes(), cudaMemcpyDeviceToHost, s));
      AISP_CUDA_CHECK(cudaStreamSynchronize(s));
      for (std::size_t b = 0; b < host.size(); ++b) {
        if (host[b] != want) return fmt::format("block {}: {}", b, hex_mismatch(host[b], want));
      }
      return "";
    };
    const Timing t = run_steps(ctx.hot(), s, st, "smem_read");
    const double bytes = static_cast<double>(blocks) * k_smem_threads * rounds * 16.0;
    check_bound("smem_read", bytes / t.median_s * 1e-9, sm_port_bound_gb_s(d),
                "128 bytes per clock per SM at the peak SM clock");
    return entry("smem_read", "smem", k_unit_gb_s, bytes / t.median_s * 1e-9,
                 fmt::format("ld.shared.v4 (conflict-free, 512 contiguous bytes per warp), {} reads per thread, "
                             "{} blocks of {} threads",
                             rounds, blocks, k_smem_threads),
                 t.samples);
  });
}

}  // namespace aisp::probe
