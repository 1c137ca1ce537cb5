// ch08:layernorm — the contract of the layernorm ladder: per row, y = (x - mean) / sqrt(var + eps) * w + b,
// on bf16 rows with fp32 statistics, weight and bias of one row's length (bf16).
//
// The normalization of every transformer block. Like softmax, each row needs statistics (its mean and
// variance) before any output can be written; the lesson is how to get both in one pass without losing
// accuracy (Welford), and how to read the row from DRAM once.
// Bound: the DRAM copy ceiling. Minimum traffic: x read once, y written once, w and b read once (2 bytes
// each): 2 * 2 * rows * cols + 2 * 2 * cols bytes; at the default 32768 x 8192, 1.07 GB per launch.
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::layernorm {

// PyTorch's default for nn.LayerNorm.
constexpr float k_eps = 1e-5f;

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* x;       // rows x cols, row-major
  const __nv_bfloat16* weight;  // cols
  const __nv_bfloat16* bias;    // cols
  __nv_bfloat16* y;             // rows x cols, row-major
  int rows;
  int cols;                     // a multiple of 8: every row starts on a 16-byte boundary (see allocate)
  int sm_count;                 // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted path (problem.cu): one block per row, fp64 two-pass statistics. Writes ref.
void launch_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream);

class LayernormProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch08",
            .ladder = "layernorm",
            .summary = "row layer norm of bf16 with weight and bias (fp32 statistics); bound: DRAM copy",
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
      throw UsageError("ch08:layernorm: cols must be a multiple of 8 (16-byte rows), got " +
                       std::to_string(m_cols));
    }
    m_x = DeviceBuffer<__nv_bfloat16>(count());
    m_weight = DeviceBuffer<__nv_bfloat16>(m_cols);
    m_bias = DeviceBuffer<__nv_bfloat16>(m_cols);
    m_y = DeviceBuffer<__nv_bfloat16>(count());
    m_ref = DeviceBuffer<__nv_bfloat16>(count());
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  // x in [-2, 6): a mean of 2 next to a standard deviation of 2.3, so that a naive E[x^2] - E[x]^2
  // would lose digits (the two-pass and Welford steps do not). Weight around 1, bias around 0; each
  // tensor from its own seed so that they are not correlated with x.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -2.0, 6.0, stream);
    fill_uniform(in[1], seed * 3 + 1, 0.5, 1.5, stream);
    fill_uniform(in[2], seed * 5 + 2, -1.0, 1.0, stream);
    launch_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), count(), DType::bf16},
            {"weight", m_weight.data(), static_cast<std::size_t>(m_cols), DType::bf16},
            {"bias", m_bias.data(), static_cast<std::size_t>(m_cols), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"y", m_y.data(), count(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), count(), DType::bf16}};
  }

  // The reference is the exact result rounded to bf16 once; a variant computes in fp32 and rounds once.
  // Near a rounding boundary the two land on neighbouring bf16 values: one ulp, at most 2^-7 of the
  // value (8 significant bits). Outputs near zero come from cancellation in x_hat * w + b, where fp32
  // carries an absolute error of a few 1e-6 (values up to ~5, statistics over 8192 elements): atol 1e-4,
  // still far below a bf16 ulp at 1 (2^-7).
  Tolerance tolerance() const override { return {1e-4, 0x1.0p-7}; }

  // Minimum DRAM traffic: x read once, y written once, weight and bias read once. FLOPs (fp32, per
  // element): the sum for the mean (1), the squared deviation (2), normalize, scale and shift (4).
  Work work() const override {
    const double xy = 2.0 * static_cast<double>(count());
    const double wb = 2.0 * 2.0 * m_cols;
    return {.bytes = 2.0 * xy + wb, .flops = 7.0 * static_cast<double>(count()),
            .bytes_read = xy + wb, .bytes_written = xy, .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_weight.data(), m_bias.data(), m_y.data(), m_rows, m_cols,
            m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_rows) * m_cols; }

  int m_rows = 0;
  int m_cols = 0;
  DeviceBuffer<__nv_bfloat16> m_x;
  DeviceBuffer<__nv_bfloat16> m_weight;
  DeviceBuffer<__nv_bfloat16> m_bias;
  DeviceBuffer<__nv_bfloat16> m_y;
  DeviceBuffer<__nv_bfloat16> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch08::layernorm
