// ch08:rmsnorm — the contract of the rmsnorm ladder: per row, y = x / sqrt(mean(x^2) + eps) * w, on bf16
// rows with fp32 statistics and a weight of one row's length (bf16). No bias and no mean subtraction:
// that is RMSNorm (Zhang & Sennrich 2019) as Llama-style models use it.
//
// One statistic per row (the mean of squares) instead of layer norm's two, so Welford has nothing to do
// here; the lesson is fusion (one kernel instead of a statistics kernel and a normalize kernel) and then
// reading the row from DRAM once, from registers.
// Bound: the DRAM copy ceiling. Minimum traffic: x read once, y written once, w read once (2 bytes each):
// 2 * 2 * rows * cols + 2 * cols bytes; at the default 32768 x 8192, 1.07 GB per launch.
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::rmsnorm {

// Llama's value.
constexpr float k_eps = 1e-6f;

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* x;       // rows x cols, row-major
  const __nv_bfloat16* weight;  // cols
  __nv_bfloat16* y;             // rows x cols, row-major
  int rows;
  int cols;                     // a multiple of 8: every row starts on a 16-byte boundary (see allocate)
  int sm_count;                 // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted path (problem.cu): one block per row, fp64 statistics. Writes ref.
void launch_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream);

class RmsnormProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch08",
            .ladder = "rmsnorm",
            .summary = "row RMS norm of bf16 with weight, no bias (fp32 statistics); bound: DRAM copy",
            .axes = {{.name = "rows", .default_value = 32768, .help = "rows (independent normalizations)",
                      // Odd, so that no grid divides it evenly.
                      .test_value = 37},
                     {.name = "cols", .default_value = 8192,
                      .help = "bf16 elements per row; a multiple of 8 (16-byte rows)", .min_value = 8,
                      // 125 16-byte vectors: not a multiple of any block size, so per-thread tails run.
                      .test_value = 1000}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_rows = static_cast<int>(axes.at("rows"));
    m_cols = static_cast<int>(axes.at("cols"));
    // Rows of a multiple of 8 bf16 start on 16-byte boundaries, which the vectorized steps need; model
    // widths are multiples of 64 anyway. Enforced here, once, for every step.
    if (m_cols % 8 != 0) {
      throw UsageError("ch08:rmsnorm: cols must be a multiple of 8 (16-byte rows), got " +
                       std::to_string(m_cols));
    }
    m_x = DeviceBuffer<__nv_bfloat16>(count());
    m_weight = DeviceBuffer<__nv_bfloat16>(m_cols);
    m_y = DeviceBuffer<__nv_bfloat16>(count());
    m_ref = DeviceBuffer<__nv_bfloat16>(count());
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  // x in [-3, 3), weight around 1, from its own seed so that it is not correlated with x.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -3.0, 3.0, stream);
    fill_uniform(in[1], seed * 3 + 1, 0.5, 1.5, stream);
    launch_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), count(), DType::bf16},
            {"weight", m_weight.data(), static_cast<std::size_t>(m_cols), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"y", m_y.data(), count(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), count(), DType::bf16}};
  }

  // The reference is the exact result rounded to bf16 once; a variant computes in fp32 and rounds once.
  // Near a rounding boundary the two land on neighbouring bf16 values: one ulp, at most 2^-7 of the
  // value (8 significant bits). y is a product, with no cancellation, so fp32's error stays relative
  // (~1e-6); atol only covers the smallest outputs.
  Tolerance tolerance() const override { return {1e-6, 0x1.0p-7}; }

  // Minimum DRAM traffic: x read once, y written once, weight read once. FLOPs (fp32, per element): the
  // square-and-add (2), the two multiplies by rstd and by w (2).
  Work work() const override {
    const double xy = 2.0 * static_cast<double>(count());
    const double w = 2.0 * m_cols;
    return {.bytes = 2.0 * xy + w, .flops = 4.0 * static_cast<double>(count()),
            .bytes_read = xy + w, .bytes_written = xy, .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_weight.data(), m_y.data(), m_rows, m_cols, m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_rows) * m_cols; }

  int m_rows = 0;
  int m_cols = 0;
  DeviceBuffer<__nv_bfloat16> m_x;
  DeviceBuffer<__nv_bfloat16> m_weight;
  DeviceBuffer<__nv_bfloat16> m_y;
  DeviceBuffer<__nv_bfloat16> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch08::rmsnorm
