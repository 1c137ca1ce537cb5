// ch08:softmax — the contract of the softmax ladder: y[r][c] = exp(x[r][c] - max_r) / sum_r, per row,
// on bf16 rows with fp32 arithmetic inside.
//
// The last-dimension softmax of attention scores and of a language model's logits. Each row needs two
// reductions (its max, then the sum of exponentials) before a single output can be written, which is what
// makes it more than a copy: the lesson is how few times the row has to come from DRAM (ideally once) and
// how to keep enough bytes in flight while a block waits on its reductions.
// Bound: the DRAM copy ceiling. Minimum traffic: each input read once, each output written once, 2 bytes
// each: 2 * 2 * rows * cols bytes; at the default 32768 x 8192 that is 1.07 GB per launch (20x the L2).
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "chapters/ch08_occupancy_pipelines/softmax/online.cuh"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::softmax {

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* x;  // rows x cols, row-major
  __nv_bfloat16* y;        // rows x cols, row-major
  int rows;
  int cols;                // a multiple of 8: every row starts on a 16-byte boundary (see allocate)
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted path (problem.cu): one block per row, fp64 arithmetic, accurate exp. Writes ref.
void launch_reference(const __nv_bfloat16* x, __nv_bfloat16* ref, int rows, int cols, cudaStream_t stream);

class SoftmaxProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch08",
            .ladder = "softmax",
            .summary = "row softmax of bf16 (fp32 inside); bound: DRAM copy bandwidth",
            .axes = {{.name = "rows", .default_value = 32768, .help = "rows (independent softmaxes)",
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
      throw UsageError("ch08:softmax: cols must be a multiple of 8 (16-byte rows), got " +
                                  std::to_string(m_cols));
    }
    const std::size_t n = count();
    m_x = DeviceBuffer<__nv_bfloat16>(n);
    m_y = DeviceBuffer<__nv_bfloat16>(n);
    m_ref = DeviceBuffer<__nv_bfloat16>(n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  // Inputs in [-8, 8): exp(x - max) then spans e^-16 .. 1 within a row, so the max subtraction and
  // the sum both matter (inputs in [-1, 1] would give a nearly flat 1/cols).
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -8.0, 8.0, stream);
    launch_reference(m_x.data(), m_ref.data(), m_rows, m_cols, stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), count(), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"y", m_y.data(), count(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), count(), DType::bf16}};
  }

  // The reference is the exact softmax rounded to bf16 once; a variant computes in fp32 (with __expf,
  // relative error ~1e-6 here) and rounds once. The two can land on neighbouring bf16 values when the
  // exact result sits near a rounding boundary: one bf16 ulp is at most 2^-7 of the value (8 significant
  // bits). Summation order changes only fp32 bits far below that. atol covers nothing real: outputs
  // are >= ~1e-11, bf16 keeps their relative precision.
  Tolerance tolerance() const override { return {1e-12, 0x1.0p-7}; }

  // Minimum DRAM traffic: x read once, y written once. FLOPs (fp32, per element): subtract the max,
  // exp (counted as one), add to the sum, multiply by 1/sum.
  Work work() const override {
    const double bytes = 2.0 * static_cast<double>(count());
    return {.bytes = 2.0 * bytes, .flops = 4.0 * static_cast<double>(count()),
            .bytes_read = bytes, .bytes_written = bytes, .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_y.data(), m_rows, m_cols, m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_rows) * m_cols; }

  int m_rows = 0;
  int m_cols = 0;
  DeviceBuffer<__nv_bfloat16> m_x;
  DeviceBuffer<__nv_bfloat16> m_y;
  DeviceBuffer<__nv_bfloat16> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch08::softmax
