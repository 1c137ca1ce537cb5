// ch12:pdl — the contract of the programmatic-dependent-launch ladder: two dependent kernels, a producer
// y = silu(x) over a rows x cols matrix and a consumer out = y * w[col] + b[col] (a per-column scale and
// bias, an epilogue as it follows an activation in a transformer's MLP).
//
// The consumer has a prologue that does not depend on the producer: each thread loads the scale and bias
// of its columns. With a plain stream dependency the consumer cannot even be scheduled until the last
// producer block has finished and its writes are flushed; the ladder lets it start early, do its prologue
// while the producer's last blocks drain, and wait only where it reads y.
//
// Sizes: the default 256 x 4096 (a decode batch of 256 tokens at hidden size 4096) makes each kernel a
// few µs, the regime where the gap between dependent kernels (launch, drain, ramp-up) is a large part of
// the pair's time: that is what a decode step looks like, and where PDL pays. Larger matrices make the gap
// a smaller fraction (sweep rows to see it).
//
// Clock: gpu (the subject is device-side: the gap between two kernels already queued, not host launch
// cost), mode: cold, one producer/consumer pair per sample. The declared work is what both kernels move:
// x read, y written and read back, out written, w and b read once. (At the default size y fits in L2, so
// the minimum DRAM traffic of the pair is lower; the report's GB/s is against the kernels' traffic.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch12_graphs/pdl/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch12::pdl {

struct Args {
  const float* x;  // rows x cols, row-major
  const float* w;  // cols
  const float* b;  // cols
  float* y;        // rows x cols: the producer's output, the consumer's input (validated too)
  float* out;      // rows x cols
  int rows;
  int cols;  // a multiple of 4: both kernels move float4s
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// Launch geometry shared by both steps (the lesson is the dependency, not the geometry): 256-thread
// blocks, for each kernel as many per SM as fill half of the SM's threads (4 on Hopper's 2,048), so a
// consumer block that is scheduled early finds room beside the producer's blocks instead of waiting for
// them to leave.
inline constexpr int k_threads = 256;

inline int blocks_per_sm(const Args& a) { return std::max(1, a.max_threads_per_sm / (2 * k_threads)); }
inline int producer_blocks(const Args& a) { return a.sm_count * blocks_per_sm(a); }

// The consumer's grid: x over groups of 4 columns (one float4 of w and b per thread, loaded once),
// y over rows, so that each thread keeps its columns' scale and bias in registers for all its rows.
inline dim3 consumer_grid(const Args& a) {
  const int groups = a.cols / 4;
  const int gx = (groups + k_threads - 1) / k_threads;
  const int gy = std::clamp(a.sm_count * blocks_per_sm(a) / gx, 1, a.rows);
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
}

// The trusted device reference (device_reference.cu): both results in double from the same inputs,
// rounded once to fp32.
void pair_on_device(const float* x, const float* w, const float* b, int rows, int cols, float* y_ref,
                    float* out_ref, cudaStream_t stream);

class PdlProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch12",
            .ladder = "pdl",
            .summary = "silu producer -> scale/bias consumer: stream order vs programmatic dependent launch",
            .axes = {{.name = "rows", .default_value = 256, .help = "matrix rows (tokens)", .test_value = 37,
                      .default_sweep = {256, 1024, 4096}},
                     {.name = "cols",
                      .default_value = 4096,
                      .help = "matrix columns (hidden size), a multiple of 4",
                      // 1,025 float4 groups: the consumer's last x-block is partly idle.
                      .test_value = 4100}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t rows = axes.at("rows"), cols = axes.at("cols");
    if (cols % 4 != 0) {
      throw UsageError("ch12:pdl: cols must be a multiple of 4 (float4 rows), got " + std::to_string(cols));
    }
    if (rows * cols > (std::int64_t{1} << 30)) throw UsageError("ch12:pdl: rows * cols must be at most 2^30");
    m_rows = static_cast<int>(rows);
    m_cols = static_cast<int>(cols);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
    const std::size_t n = count();
    m_x = DeviceBuffer<float>(n);
    m_y = DeviceBuffer<float>(n);
    m_out = DeviceBuffer<float>(n);
    m_y_ref = DeviceBuffer<float>(n);
    m_out_ref = DeviceBuffer<float>(n);
    m_w = DeviceBuffer<float>(static_cast<std::size_t>(m_cols));
    m_b = DeviceBuffer<float>(static_cast<std::size_t>(m_cols));
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, k_x_lo, k_x_hi, stream);
    fill_uniform(in[1], seed ^ 0x77777777a5a5a5a5ULL, k_w_lo, k_w_hi, stream);
    fill_uniform(in[2], seed ^ 0x3c3c3c3cb1b1b1b1ULL, k_b_lo, k_b_hi, stream);
    pair_on_device(m_x.data(), m_w.data(), m_b.data(), m_rows, m_cols, m_y_ref.data(), m_out_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    const auto c = static_cast<std::size_t>(m_cols);
    return {{"x", m_x.data(), count(), DType::f32},
            {"w", m_w.data(), c, DType::f32},
            {"b", m_b.data(), c, DType::f32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"y", m_y.data(), count(), DType::f32}, {"out", m_out.data(), count(), DType::f32}};
  }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_y_ref.data(), count(), DType::f32}, {"out_ref", m_out_ref.data(), count(), DType::f32}};
  }

  // fp32 evaluation against the double reference; the derivation is in reference.hpp.
  Tolerance tolerance() const override { return {k_atol, k_rtol}; }

  Work work() const override {
    const double n = static_cast<double>(count()), c = m_cols;
    const double read = 4.0 * n /*x*/ + 4.0 * n /*y*/ + 8.0 * c /*w, b*/;
    const double written = 4.0 * n /*y*/ + 4.0 * n /*out*/;
    return {.bytes = read + written, .bytes_read = read, .bytes_written = written};
  }

  Args args() const override {
    return {m_x.data(), m_w.data(), m_b.data(), m_y.data(), m_out.data(), m_rows, m_cols, m_sm_count,
            m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  // The device's double results rounded to fp32 against the host's: one fp32 rounding apart at most.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = inputs();
    const auto x = to_host(in[0], stream), w = to_host(in[1], stream), b = to_host(in[2], stream);
    std::vector<double> y(x.size()), out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t col = i % static_cast<std::size_t>(m_cols);
      y[i] = static_cast<float>(silu(x[i]));
      out[i] = static_cast<float>(scale_bias(silu(x[i]), w[col], b[col]));
    }
    // atol: where y w cancels b, the two double evaluations may differ by ~1e-15 absolute.
    const Tolerance one_rounding{1e-12, 1.0 / 8388608.0};
    const auto refs = references();
    std::string why = compare_on_host("y_ref", to_host(refs[0], stream), y, one_rounding);
    if (why.empty()) why = compare_on_host("out_ref", to_host(refs[1], stream), out, one_rounding);
    return why;
  }

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_rows) * static_cast<std::size_t>(m_cols); }

  int m_rows = 0;
  int m_cols = 0;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_w;
  DeviceBuffer<float> m_b;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_y_ref;
  DeviceBuffer<float> m_out_ref;
};

}  // namespace aisp::ch12::pdl
