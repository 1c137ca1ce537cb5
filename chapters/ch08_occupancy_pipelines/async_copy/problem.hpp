// ch08:async_copy — the contract of the async-copy ladder: a 9-point stencil over n fp32 values
// (reference.hpp), computed tile by tile through shared memory by persistent blocks.
//
// The lesson is how a tile gets into shared memory: by the threads (load, wait, store), by cp.async
// (the copy runs while the block computes the previous tile), or by the TMA unit (one bulk copy per tile,
// completion tracked by an mbarrier). The stencil is what makes the staging worth it: each input is read
// by 9 outputs, so the tile in shared memory is reused 9 times.
//
// The axis smem_kib is the shared memory every step's block stages into, the same for all steps: the
// synchronous step fills it with one tile, cp.async with two half-size tiles (double buffering), the TMA
// step with three third-size tiles (tile_geometry below). It sets how many blocks an SM holds, and that
// is the regime the lesson turns on: with 24 KiB, 8 blocks per SM, the SM's other blocks hide each
// synchronous block's load latency and the copies gain nothing; with 200 KiB one block fills an SM, and a
// block that waits for its own loads leaves DRAM idle unless it has the next tile already in flight.
//
// Layout, shared by every step: the input lives in a zero-padded buffer, x[i] at in[k_radius + i], with
// zeros before it and after it for more than any step's largest tile (ghost cells, the usual stencil
// convention). Tile t of a step with tile size T always loads in[t * T, t * T + T + 2 * k_radius): in
// bounds, 16-byte aligned and a multiple of 16 bytes long, as cp.async and cp.async.bulk require, with no
// edge cases in the copy.
//
// Declared work: every input read once and every output written once (8n bytes; the 8 halo values per
// tile are re-read from L2 at most), and 9 FMAs per output (18n FLOPs, fp32). With the default
// n = 2^28 that is 2.15 GB: about 0.5 ms at the DRAM copy ceiling, against 0.08 ms of FMAs, so
// the bound is DRAM.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "chapters/ch08_occupancy_pipelines/async_copy/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/kernel_facts.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::async_copy {

constexpr int k_threads = 256;  // per block, every step
static_assert(k_radius % 4 == 0, "tiles must start and end on 16-byte boundaries");

// One stage of a step's shared memory: `load` inputs (the tile and its halo) at a stride of `load`
// floats, a multiple of 32 (128 bytes: every stage starts 128-byte aligned, more than the 16 bytes
// cp.async.bulk needs), so the tile, load - 2 * k_radius, is a multiple of 4 floats.
struct TileGeometry {
  int load = 0;  // floats per stage, tile + halo
  int tile = 0;  // outputs per tile
  std::size_t smem_bytes(int stages) const { return sizeof(float) * static_cast<std::size_t>(load) * stages; }
};

// The largest stage that `stages` of fit in smem_bytes.
constexpr TileGeometry tile_geometry(std::size_t smem_bytes, int stages) {
  const int load = static_cast<int>(smem_bytes / sizeof(float) / static_cast<std::size_t>(stages)) / 32 * 32;
  return {load, load - 2 * k_radius};
}

// The smallest smem_kib: three stages of at least 32 floats with room for a tile.
inline constexpr std::int64_t k_min_smem_kib = 8;

struct Args {
  const float* in;  // padded: x[i] at in[k_radius + i], zeros after x for at least one tile of any step
  float* out;       // n
  std::size_t n;
  std::size_t smem_bytes;  // shared memory each step's block stages into (axis smem_kib)
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
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
                      // Not a multiple of any tile nor of 4: the last tile's tail runs.
                      .test_value = (std::int64_t{1} << 16) + 3},
                     {.name = "smem_kib",
                      .default_value = 200,
                      .help = "KiB of shared memory per block, split into 1 (sync), 2 (cp.async) or 3 (TMA) "
                              "tiles: 24 leaves 8 blocks per SM, 200 one",
                      .min_value = k_min_smem_kib,
                      // Small enough that every block of the test walks several tiles.
                      .test_value = k_min_smem_kib,
                      // From 8 blocks per SM (other blocks hide the latency) to 1 (nothing else does).
                      .default_sweep = {24, 64, 112, 200}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_smem_bytes = static_cast<std::size_t>(axes.at("smem_kib")) * 1024;
    if (static_cast<std::int64_t>(m_smem_bytes) > device.smem_per_block_optin_bytes - 1024) {
      throw UsageError("ch08:async_copy: smem_kib = " + std::to_string(axes.at("smem_kib")) +
                       " is more than this GPU gives a block (" +
                       std::to_string(device.smem_per_block_optin_bytes / 1024 - 1) + " KiB, keeping 1 KiB spare)");
    }
    // The synchronous step's single stage is the largest tile of any step: the last tile of every step
    // ends at most that far past n, so that many zeros after x keep every tile load in bounds.
    const std::size_t largest = static_cast<std::size_t>(tile_geometry(m_smem_bytes, 1).load);
    m_in = DeviceBuffer<float>(m_n + k_radius + largest);
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
    return {m_in.data(), m_out.data(), m_n, m_smem_bytes, m_sm_count, m_max_threads_per_sm};
  }

 private:
  TensorView interior() const { return {"x", m_in.data() + k_radius, m_n, DType::f32}; }

  std::size_t m_n = 0, m_smem_bytes = 0;
  DeviceBuffer<float> m_in;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of k_threads-thread blocks, for the reference (no shared memory).
inline int full_wave_blocks(const Args& a) { return a.sm_count * (a.max_threads_per_sm / k_threads); }

// Every step: allows `kernel` the dynamic shared memory it asks for (above the default 48 KiB it must be
// opted into) and returns one full wave of its blocks, as many as the occupancy API says fit per SM with
// that much shared memory (persistent blocks walk the tiles). Host calls only; no work on the stream.
inline int prepare_wave(const Args& a, const void* kernel, std::size_t dynamic_smem) {
  AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(dynamic_smem)));
  int per_sm = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, dynamic_smem));
  if (per_sm < 1) throw std::runtime_error("ch08:async_copy: no block fits on an SM with this shared memory");
  return a.sm_count * per_sm;
}

// Tile t's outputs from its inputs in shared memory (every step): thread quads q = threadIdx.x,
// + k_threads, ...; outputs 4q..4q+3 need s[4q .. 4q+11] (three 16-byte loads, 512 contiguous bytes per
// warp: no bank conflict). The 9 fmaf per output in the reference's order: bit-exact.
__device__ inline void stencil_tile(const float* s, float* __restrict__ out, std::size_t t, int tile, std::size_t n) {
  for (int q = threadIdx.x; q < tile / 4; q += k_threads) {
    float v[12];
#pragma unroll
    for (int m = 0; m < 3; ++m) {
      const float4 f = reinterpret_cast<const float4*>(s)[q + m];
      v[4 * m] = f.x, v[4 * m + 1] = f.y, v[4 * m + 2] = f.z, v[4 * m + 3] = f.w;
    }
    constexpr StencilWeights w = stencil_weights();  // immediates in the FMAs
    float r[4];
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < k_points; ++k) acc = __fmaf_rn(w.w[k], v[o + k], acc);
      r[o] = acc;
    }
    const std::size_t i = t * static_cast<std::size_t>(tile) + 4 * static_cast<std::size_t>(q);
    if (i + 4 <= n) {
      *reinterpret_cast<float4*>(out + i) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
      for (int o = 0; o < 4; ++o) {
        if (i + o < n) out[i + o] = r[o];
      }
    }
  }
}

// Facts every step reports: registers, blocks per SM and occupancy at its shared memory, and its tile.
inline std::vector<Fact> tile_facts(const Args& a, const void* kernel, TileGeometry g, int stages) {
  prepare_wave(a, kernel, g.smem_bytes(stages));
  std::vector<Fact> f = standard_facts(kernel_facts(kernel, k_threads, g.smem_bytes(stages)));
  f.push_back({"tile", std::to_string(g.tile)});
  f.push_back({"stages", std::to_string(stages)});
  return f;
}

}  // namespace aisp::ch08::async_copy
