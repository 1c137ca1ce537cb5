// ch06:launch_bounds — the contract of the launch_bounds ladder: mix the 8 channels of every pixel with
// one 8x8 matrix, y[p] = M x[src(p)] (reference.hpp), for `pixels` pixels of 8 fp32 channels. src(p) = p
// (axis gather=0, a streaming kernel) or a pixel read through an index array idx: a fixed permutation of
// all pixels (gather=1: a remap, y[p] = M x[idx[p]], each thread's pixel load waiting on its index load)
// or a scattered lookup into a table of the first 2^16 pixels (gather=2: 2 MiB, L2-resident), or whole
// runs of 32 pixels permuted (gather=3: a block table, each warp's loads coalesced but dependent).
//
// A memory-bound kernel whose threads hold a lot of state: each keeps the 64 matrix entries in registers
// for its whole life, so it needs ~90 registers per thread, and registers, not threads, decide how many
// warps an SM holds. This ladder keeps the kernel and the block size (256) and changes only what the
// compiler is told about registers (__launch_bounds__), reporting registers, spill bytes and the
// occupancy the runtime predicts beside each time (the variants' facts).
// The two values of `gather` are the two regimes of the lesson. gather=0 streams: every thread's loads are
// independent and coalesced, 25% occupancy already keeps DRAM busy, and a register cap can only add work.
// gather=1 was meant to be latency-bound: a thread's 32-byte pixel load is a random sector that can only be
// issued after its index load returns, two DRAM round trips per pixel. Measured, it is not short of
// warps: 4x the warps (step 04) run no faster; random 32-byte sectors cap DRAM itself. gather=2 keeps the
// dependent load but serves it from L2 (a 2 MiB table); measured, its random 32-byte gathers cost the
// load unit 32 wavefronts per warp instruction, and 4x the warps run slower. gather=3 keeps every load
// coalesced and only the dependence: a warp reads 32 indices, then the 32 contiguous pixels they point to
// (a block table, as a paged KV cache's), two DRAM round trips per pixel with the bytes of one: bytes in
// flight per SM are what the resident warps hold, the latency-bound case where warps bought with a
// register cap should pay for the re-loads.
// Declared work: 32 bytes read and 32 written per pixel, plus 4 bytes of index with gather=1 (the
// matrix is 256 bytes, read once per thread from L2, not counted; the permutation reads every pixel
// once), 64 FMAs = 128 FLOPs per pixel (4 FLOP/byte: DRAM-bound). With 2^25 pixels, 2.15 GB per launch
// (2.28 GB with gather=1), measured cold. gather=2 reads the table once (2 MiB) and 4 bytes of index per
// pixel: 36 bytes of DRAM traffic per pixel, 1.21 GB per launch. gather=3 reads what gather=1 does.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/ch06_cuda_basics/launch_bounds/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/kernel_facts.hpp"
#include "device/ladder.hpp"

namespace aisp::ch06::launch_bounds {

struct Args {
  const float* x;          // pixels * 8, pixel-major
  const float* m;          // 8 x 8, row-major
  float* y;                // pixels * 8
  const std::uint32_t* idx;  // gather=1, 2, 3: the source pixel of each output pixel; nullptr for gather=0
  std::size_t pixels;
  int sm_count;
};

// Fills idx[p] = source_pixel(gather, p, pixels, multiplier, table) (reference.hpp): part of generate(), not
// timed.
void fill_gather_index(std::uint32_t* idx, std::size_t pixels, int gather, std::uint64_t multiplier,
                       std::uint64_t table, cudaStream_t stream);

// The trusted device reference (device_reference.cu): one thread per output value, matrix from global.
void mix_reference(const Args& a, float* ref, cudaStream_t stream);

class LaunchBoundsProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch06",
            .ladder = "launch_bounds",
            .summary = "8x8 channel mix per pixel, 64 matrix registers per thread; the same kernel with and "
                       "without __launch_bounds__",
            .axes = {{.name = "pixels", .default_value = std::int64_t{1} << 25,
                      .help = "pixels of 8 fp32 channels (default 2^25: 1 GiB in, 1 GiB out)",
                      .test_value = 100003},  // odd: a partial last wave of threads
                     {.name = "gather",
                      .default_value = 0,
                      .help = "0: pixels streamed in order; 1: each pixel read through a permutation index "
                              "(random DRAM sectors); 2: read through an index into a 2 MiB table (L2 hits); 3: "
                              "runs of 32 pixels permuted through an index (coalesced, dependent: latency-bound)",
                      .min_value = 0,
                      // Every regime by default: where the register cap loses and where it should win.
                      .default_sweep = {0, 1, 2, 3}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_pixels = static_cast<std::size_t>(axes.at("pixels"));
    const std::int64_t gather = axes.at("gather");
    if (gather > 3) throw UsageError("ch06:launch_bounds: gather must be 0, 1, 2 or 3, got " + std::to_string(gather));
    m_mode = static_cast<int>(gather);
    m_gather = gather >= 1;
    if (m_gather && m_pixels > 0xffffffffull) {
      throw UsageError("ch06:launch_bounds: gather=1, 2 and 3 index pixels with 32 bits: pixels must be below 2^32");
    }
    m_table = gather == 2 ? gather_table_pixels(m_pixels) : m_pixels;
    m_idx = DeviceBuffer<std::uint32_t>(m_gather ? m_pixels : 0);
    m_multiplier = gather == 3 ? gather_multiplier(m_pixels / k_remap_run) : m_gather ? gather_multiplier(m_pixels) : 0;
    m_x = DeviceBuffer<float>(m_pixels * k_channels);
    m_m = DeviceBuffer<float>(k_channels * k_channels);
    m_y = DeviceBuffer<float>(m_pixels * k_channels);
    m_ref = DeviceBuffer<float>(m_pixels * k_channels);
    m_sm_count = device.sm_count;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ull, -1.0, 1.0, stream);
    // The permutation does not depend on the seed: the index is part of the problem, like a remap table.
    if (m_gather) fill_gather_index(m_idx.data(), m_pixels, m_mode, m_multiplier, m_table, stream);
    mix_reference(args(), m_ref.data(), stream);
  }

  // With gather >= 1 the index array is an input too (hashed by the harness: a variant must not modify it),
  // viewed as i32: the values are below 2^31 only when pixels is, but the hash reads bytes.
  std::vector<TensorView> inputs() const override {
    std::vector<TensorView> in = {{"x", m_x.data(), m_x.size(), DType::f32},
                                  {"m", m_m.data(), m_m.size(), DType::f32}};
    if (m_gather) in.push_back({"idx", m_idx.data(), m_idx.size(), DType::i32});
    return in;
  }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_y.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), m_ref.size(), DType::f32}};
  }

  // Every variant and the reference sum the 8 products of a row in channel order with fmaf: the results
  // are bit-identical, whatever the registers; a spill moves values, it does not change arithmetic.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double p = static_cast<double>(m_pixels);
    Work w;
    // gather=2 reads each table pixel from DRAM once (then from L2); the others read every pixel once.
    w.bytes_read = sizeof(float) * k_channels * static_cast<double>(m_table) +
                   (m_gather ? sizeof(std::uint32_t) * p : 0.0);
    w.bytes_written = sizeof(float) * k_channels * p;
    w.bytes = w.bytes_read + w.bytes_written;
    w.flops = 2.0 * k_channels * k_channels * p;
    w.flop_dtype = "fp32";
    return w;
  }

  Args args() const override {
    return {m_x.data(), m_m.data(), m_y.data(), m_gather ? m_idx.data() : nullptr, m_pixels, m_sm_count};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(inputs()[0], stream);
    const auto m = to_host(inputs()[1], stream);
    const auto y = m_gather ? mix_channels(gather_pixels(x, m_mode, m_multiplier, m_table), m) : mix_channels(x, m);
    return compare_on_host("y_ref", to_host(references().front(), stream), y, tolerance());
  }

 private:
  std::size_t m_pixels = 0;
  bool m_gather = false;
  int m_mode = 0;  // the gather axis
  std::uint64_t m_multiplier = 0;
  std::size_t m_table = 0;  // pixels the gather reads from: all of them, or gather=2's table
  DeviceBuffer<std::uint32_t> m_idx;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_m;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
};

// Every step launches 256-thread blocks, as many as fit on the GPU at once by the occupancy API, so each
// step gets the grid its own register count allows (a full wave) and the block size never changes.
inline constexpr int k_block = 256;

inline int full_wave_blocks(const Args& a, const void* kernel) {
  int per_sm = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_block, 0));
  return a.sm_count * (per_sm > 0 ? per_sm : 1);
}

}  // namespace aisp::ch06::launch_bounds
