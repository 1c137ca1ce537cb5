// ch07:bank_conflicts — the contract of the bank-conflict ladder: every 32x32 tile of an n x n fp32
// matrix goes through shared memory `passes` times, each pass a tile transpose (store by rows, read by
// columns), and the result is written back (odd passes: the matrix transpose; even: the input itself).
//
// The lesson is shared memory, so the job is built for shared memory to be the bottleneck: each element
// crosses DRAM twice (read once, written once: 8 n^2 bytes) but crosses shared memory 8 * passes bytes
// (a 4-byte store and a 4-byte load per pass). With the defaults (n = 8192, passes = 64) that is 34.4 GB
// of shared-memory traffic against 0.54 GB of DRAM traffic.
//
// Declared work and ceiling: the bytes declared are the shared-memory bytes (stores + loads, 4 bytes each,
// counted over whole tiles), placed against the measured shared-memory ceiling `smem_read` (`aisp hw
// peaks`, 128 bytes per clock per SM). Loads and stores share the same 32 banks of 4 bytes, so one
// ceiling covers both. FLOPs: 0 (no arithmetic). The DRAM bytes are not declared: they are ~1.6% of the
// declared bytes, moved at a seventh of the time, and overlap with other blocks' shared-memory passes.
#pragma once

#include "chapters/ch07_memory_access/bank_conflicts/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch07::bank_conflicts {

struct Args {
  const float* in;
  float* out;
  std::int64_t n;
  std::int64_t passes;
};

// The tile every step uses: 32 x 32 fp32 (one column of 32 words spans all 32 banks), moved by 32 x 8
// threads, each holding 4 elements of the tile.
constexpr int k_tile = 32;
constexpr int k_rows = 8;

// The trusted device reference (device_reference.cu): one thread per element, global to global.
void tile_passes_reference(const Args& a, float* ref, cudaStream_t stream);

class BankConflictsProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch07",
            .ladder = "bank_conflicts",
            .summary = "32x32 fp32 tiles transposed in shared memory `passes` times; bound: shared-memory "
                       "bandwidth",
            .axes = {{.name = "n", .default_value = 8192, .help = "matrix side (fp32; default 256 MiB)",
                      // Not a multiple of 32: the edge tiles' bounds checks run.
                      .test_value = 100},
                     {.name = "passes", .default_value = 64,
                      .help = "transposes of each tile in shared memory (odd: the output is the transpose)",
                      .test_value = 5}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_n = axes.at("n");
    m_passes = axes.at("passes");
    const auto count = static_cast<std::size_t>(m_n * m_n);
    m_in = DeviceBuffer<float>(count);
    m_out = DeviceBuffer<float>(count);
    m_ref = DeviceBuffer<float>(count);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    tile_passes_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"in", m_in.data(), m_in.size(), DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_out.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_ref.size(), DType::f32}};
  }

  // Values are only moved, never computed: any difference is a bug.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double tiles_per_side = static_cast<double>((m_n + k_tile - 1) / k_tile);
    const double elements = tiles_per_side * tiles_per_side * k_tile * k_tile;
    return {.bytes = 8.0 * elements * static_cast<double>(m_passes), .flops = 0.0, .ceiling = "smem_read"};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = to_host(inputs().front(), stream);
    const auto ref = to_host(references().front(), stream);
    return compare_on_host("out_ref", ref, tile_passes(in, m_n, m_passes), tolerance());
  }

  Args args() const override { return {m_in.data(), m_out.data(), m_n, m_passes}; }

 private:
  std::int64_t m_n = 0, m_passes = 0;
  DeviceBuffer<float> m_in;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
};

// One block per tile, 32 x 8 threads: the geometry every step shares.
inline dim3 tile_grid(const Args& a) {
  const auto t = static_cast<unsigned>((a.n + k_tile - 1) / k_tile);
  return dim3(t, t);
}

}  // namespace aisp::ch07::bank_conflicts
