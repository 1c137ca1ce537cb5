// ch07:transpose — the contract of the transpose ladder: out[c][r] = in[r][c] for an fp32 matrix of
// `rows` x `cols`, both row-major (out is cols x rows).
//
// A transpose does no arithmetic and moves the same bytes as a copy: 2 * 4 * rows * cols bytes must cross
// DRAM (every input read once, every output written once), so its bound is the DRAM copy ceiling. What
// makes it harder than a copy is that one side is always read or written along columns: the ladder is
// about turning that side back into whole 128-byte lines. Default 16384 x 16384: 1 GiB per matrix, 2.15 GB
// per launch, many times any L2.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/ch07_memory_access/transpose/reference.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch07::transpose {

// What every variant's launch receives.
struct Args {
  const float* in;  // rows x cols, row-major
  float* out;       // cols x rows, row-major
  std::size_t rows;
  std::size_t cols;
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): one thread per element, no tiles, no tricks.
void transpose_on_device(const float* in, float* out, std::size_t rows, std::size_t cols, cudaStream_t stream);

class TransposeProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch07",
            .ladder = "transpose",
            .summary = "out = in^T for an fp32 rows x cols matrix; bound: DRAM copy bandwidth",
            .axes = {{.name = "rows", .default_value = 16384,
                      .help = "rows of the input (= columns of the output), fp32",
                      // Not a multiple of 32 or 64: the tests cover the partial tiles at both edges.
                      .test_value = 1092},
                     {.name = "cols", .default_value = 16384,
                      .help = "columns of the input (= rows of the output), fp32",
                      .test_value = 1000}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_rows = static_cast<std::size_t>(axes.at("rows"));
    m_cols = static_cast<std::size_t>(axes.at("cols"));
    m_in = DeviceBuffer<float>(count());
    m_out = DeviceBuffer<float>(count());
    m_ref = DeviceBuffer<float>(count());
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    transpose_on_device(m_in.data(), m_ref.data(), m_rows, m_cols, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"in", m_in.data(), count(), DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), count(), DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"out_ref", m_ref.data(), count(), DType::f32}}; }

  // A transpose moves bits and computes nothing: any difference at all is a bug.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double bytes = sizeof(float) * static_cast<double>(count());
    return {.bytes = 2.0 * bytes, .flops = 0.0, .bytes_read = bytes, .bytes_written = bytes};
  }

  Args args() const override {
    return {m_in.data(), m_out.data(), m_rows, m_cols, m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = to_host(inputs().front(), stream);
    const auto want = transpose_reference(in, m_rows, m_cols);
    return compare_on_host("out_ref", to_host(references().front(), stream), want, tolerance());
  }

 private:
  std::size_t count() const { return m_rows * m_cols; }

  std::size_t m_rows = 0;
  std::size_t m_cols = 0;
  DeviceBuffer<float> m_in;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch07::transpose
