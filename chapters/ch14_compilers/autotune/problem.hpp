// ch14:autotune — the contract of the autotuning ladder: C = A B in FP32, row-major A (m x k), B (k x n),
// by one tiled kernel (tiled_sgemm.cuh) instantiated at six tile shapes (tiles.hpp).
//
// The lesson is that the best tile depends on the shape and the GPU. A big tile (128 x 128, 8 x 8 outputs
// per thread) reuses each loaded value the most and wins on large outputs; on a short, wide output it makes
// too few blocks to fill the SMs (m = 256, n = 4096: 64 blocks of 128 x 128 for 132 SMs on an H100),
// where a smaller tile wins although each of its FMAs costs more loads. So the default run sweeps m over
// 256, 1024 and 4096 (n = k = 4096): 01_fixed_tile keeps the 128 x 128 tile everywhere, 02_autotuned
// times all six in setup() and keeps the fastest for this device and shape, cached on disk.
//
// Axis `tile` picks 01_fixed_tile's tile (an index into tiles.hpp's list): `--axis tile=0,1,2,3,4,5` is
// the sweep of every tile shape under the harness's own statistics, to check 02's pick against. 02
// ignores it (it measures the same thing at each value of the sweep).
//
// Timing: the GPU clock, launches only. 02's tuning (a few launches of each candidate timed with CUDA
// events) runs in setup(), outside the measured window, once per device and shape: its cost is a fact
// (tune_ms) and a line in the worker's log, and its result is cached for every later run.
//
// Bound: the FP32 FMA rate (2 m n k FLOPs; the minimum DRAM traffic, (m k + k n + m n) * 4 bytes, is
// far smaller). Reference: a double-accumulating GEMM kernel (device_reference.cu), itself checked against
// a host GEMM at the test size.
#pragma once

#include <string>

#include "chapters/ch14_compilers/autotune/reference.hpp"
#include "chapters/ch14_compilers/autotune/tiles.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch14::autotune {

struct Args {
  const float* a;  // m x k
  const float* b;  // k x n
  float* c;        // m x n
  int m, n, k;
  int tile;        // 01_fixed_tile's candidate (axis `tile`)
};

// The trusted device reference (device_reference.cu): each output accumulated in double, then rounded.
void gemm_on_device(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

class AutotuneProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    // Test sizes: no multiple of any tile's BM, BN or BK, so every edge path runs.
    return {.chapter = "ch14",
            .ladder = "autotune",
            .summary = "FP32 tiled GEMM: one fixed tile shape vs the fastest of six, tuned in setup and cached "
                       "per device and shape; bound: FP32 FMA rate",
            .axes = {{.name = "m", .default_value = 4096, .help = "rows of A and C", .test_value = 200,
                      .default_sweep = {256, 1024, 4096}},
                     {.name = "n", .default_value = 4096, .help = "columns of B and C", .test_value = 136},
                     {.name = "k", .default_value = 4096, .help = "columns of A, rows of B", .test_value = 52},
                     {.name = "tile", .default_value = k_default_tile,
                      .help = "01_fixed_tile's tile: index into tiles.hpp (0 = 128x128x8_8x8 ... 5 = 32x32x8_2x2)",
                      .min_value = 0}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const auto m = axes.at("m"), n = axes.at("n"), k = axes.at("k"), tile = axes.at("tile");
    // 32-bit sizes in the kernels' arithmetic; the reference's grid.y, ceil(m / 16), must stay under 65536.
    constexpr std::int64_t k_max = std::int64_t{1} << 19;
    if (m > k_max || n > k_max || k > k_max || m * n > (std::int64_t{1} << 31) || m * k > (std::int64_t{1} << 31) ||
        k * n > (std::int64_t{1} << 31)) {
      throw UsageError("ch14:autotune: m, n and k must be at most 2^19 and each matrix at most 2^31 elements");
    }
    if (tile >= static_cast<std::int64_t>(k_tiles.size())) {
      throw UsageError("ch14:autotune: tile must be 0.." + std::to_string(k_tiles.size() - 1) + " (" + tile_list() +
                       "), got " + std::to_string(tile));
    }
    m_m = static_cast<int>(m);
    m_n = static_cast<int>(n);
    m_k = static_cast<int>(k);
    m_tile = static_cast<int>(tile);
    m_a = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_k);
    m_b = DeviceBuffer<float>(static_cast<std::size_t>(m_k) * m_n);
    m_c = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
    m_ref = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed + 1, -1.0, 1.0, stream);
    gemm_on_device(m_a.data(), m_b.data(), m_ref.data(), m_m, m_n, m_k, stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::f32}, {"b", m_b.data(), m_b.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"c_ref", m_ref.data(), m_ref.size(), DType::f32}}; }

  // reference.hpp derives it: ~100 standard deviations of an FP32 sum's error, far under a skipped k step.
  Tolerance tolerance() const override { return {gemm_atol(m_k), 0.0}; }

  Work work() const override {
    const double read = 4.0 * (static_cast<double>(m_m) * m_k + static_cast<double>(m_k) * m_n);
    const double written = 4.0 * static_cast<double>(m_m) * m_n;
    return {.bytes = read + written,
            .flops = 2.0 * m_m * static_cast<double>(m_n) * m_k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_a.data(), m_b.data(), m_c.data(), m_m, m_n, m_k, m_tile}; }

  bool has_host_reference() const override { return true; }
  // The device's double sums and the host's agree to a double rounding or two, so after rounding to
  // float they agree to one float ulp.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto ins = inputs();
    const auto want = gemm_reference(to_host(ins[0], stream), to_host(ins[1], stream), m_m, m_n, m_k);
    return compare_on_host("c_ref", to_host(references()[0], stream), want, {1e-30, 1.0 / 8388608.0});
  }

 private:
  int m_m = 0, m_n = 0, m_k = 0, m_tile = 0;
  DeviceBuffer<float> m_a, m_b, m_c, m_ref;
};

}  // namespace aisp::ch14::autotune
