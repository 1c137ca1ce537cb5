// selftest:copy — a hidden ladder that exists to prove the harness right: each variant misbehaves in one
// known way (wrong values, a crash, a hang) and tests/gpu/test_harness.cpp checks its verdict.
// Compiled only into aisp_gpu_tests; never part of the curriculum.
#pragma once

#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::selftest {

struct Args {
  const float* src;
  float* dst;
  std::size_t n;
};

class SelftestCopyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "selftest",
            .ladder = "copy",
            .summary = "harness self-test: variants that fail, crash and hang on purpose",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 20, .help = "fp32 elements",
                      .test_value = (std::int64_t{1} << 16) + 1}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold,
            .hidden = true};
  }
  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_src = DeviceBuffer<float>(m_n);
    m_dst = DeviceBuffer<float>(m_n);
  }
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
  }
  std::vector<TensorView> inputs() const override { return {{"src", m_src.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"dst", m_dst.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return inputs(); }
  Tolerance tolerance() const override { return {0.0, 0.0}; }
  Work work() const override { return {8.0 * static_cast<double>(m_n), 0.0}; }
  Args args() const override { return {m_src.data(), m_dst.data(), m_n}; }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_src;
  DeviceBuffer<float> m_dst;
};

}  // namespace aisp::selftest
