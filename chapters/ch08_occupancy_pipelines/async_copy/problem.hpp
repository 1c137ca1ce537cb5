// ch08:async_copy — the contract of the async-copy ladder: a 9-point stencil over n fp32 values
// (reference.hpp), computed tile by tile through shared memory by persistent blocks.
//
// The lesson is how a tile gets into shared memory: by the threads (load, wait, store), by cp.async
// (the copy runs while the block computes the previous tile), or by the TMA unit (one bulk copy per tile,
// completion tracked by an mbarrier). The stencil is what makes the staging worth it: each input is read
// by 9 outputs, so the tile in shared memory is reused 9 times.
//
// Layout, shared by every step: the input lives in a zero-padded buffer, x[i] at in[k_radius + i], with
// zeros before and after it up to a whole number of tiles (ghost cells, the usual stencil convention).
// Tile t then always loads in[t * k_tile, t * k_tile + k_load): in bounds, 16-byte aligned and a multiple
// of 16 bytes long, as cp.async and cp.async.bulk require, with no edge cases in the copy.
//
// Declared work: every input read once and every output written once (8n bytes; the 8 halo values per
// 2048-value tile are re-read from L2 at most), and 9 FMAs per output (18n FLOPs, fp32). With the
// default n = 2^28 that is 2.15 GB: about 0.5 ms at the DRAM copy ceiling, against 0.08 ms of FMAs, so
// the bound is DRAM.
#pragma once

#include "chapters/ch08_occupancy_pipelines/async_copy/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::async_copy {

constexpr int k_tile = 2048;                // outputs per tile
constexpr int k_load = k_tile + 2 * k_radius;  // inputs per tile: 2056 floats = 8224 bytes
constexpr int k_threads = 256;              // per block, every step: each thread computes 2 quads of outputs
static_assert(k_radius % 4 == 0 && k_tile % 4 == 0, "tiles must start and end on 16-byte boundaries");

struct Args {
  const float* in;  // padded: x[i] at in[k_radius + i]
  float* out;       // n
  std::size_t n;
  std::size_t tiles;
  int sm_count;     // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): each output straight from global memory.
void stencil_reference(const Args& a, float* ref, cudaStream_t stream);

class AsyncCopyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch08",
            .ladder = "async_copy",
            .summary = "9-point fp32 stencil through shared-memory tiles; bound: DRAM copy bandwidth",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements (default 2^28 = 1 GiB per buffer)",
                      // Not a multiple of the tile nor of 4: the last tile's tail runs.
                      .test_value = (std::int64_t{1} << 16) + 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_tiles = (m_n + k_tile - 1) / k_tile;
    m_in = DeviceBuffer<float>(m_tiles * k_tile + 2 * k_radius);
    m_out = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    AISP_CUDA_CHECK(cudaMemsetAsync(m_in.data(), 0, m_in.bytes(), stream));  // the ghost cells
    fill_uniform(interior(), seed, -1.0, 1.0, stream);
    stencil_reference(args(), m_ref.data(), stream);
  }

  // The whole padded buffer is the input: its hash covers the ghost cells too.
  std::vector<TensorView> inputs() const override { return {{"in", m_in.data(), m_in.size(), DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"out_ref", m_ref.data(), m_n, DType::f32}}; }

  // Every step does the same 9 fmaf in the same order as the reference: bit-exact, zero tolerance.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_n);
    return {.bytes = 8.0 * n,
            .flops = 2.0 * k_points * n,
            .bytes_read = 4.0 * n,
            .bytes_written = 4.0 * n,
            .flop_dtype = "fp32"};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(interior(), stream);
    const auto ref = to_host(references().front(), stream);
    return compare_on_host("out_ref", ref, stencil(x), tolerance());
  }

  Args args() const override {
    return {m_in.data(), m_out.data(), m_n, m_tiles, m_sm_count, m_max_threads_per_sm};
  }

 private:
  TensorView interior() const { return {"x", m_in.data() + k_radius, m_n, DType::f32}; }

  std::size_t m_n = 0, m_tiles = 0;
  DeviceBuffer<float> m_in;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of k_threads-thread blocks, persistent over the tiles: the geometry every step shares.
inline int full_wave_blocks(const Args& a) { return a.sm_count * (a.max_threads_per_sm / k_threads); }

}  // namespace aisp::ch08::async_copy
