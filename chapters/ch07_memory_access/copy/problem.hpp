// ch07:copy — the contract of the copy ladder: dst[i] = src[i] for n fp32 elements.
//
// The simplest memory-bound kernel there is, and so the cleanest lesson in how a warp's accesses become
// DRAM transactions. Its bound is the DRAM copy bandwidth: 2 * 4 * n bytes must cross DRAM (every input
// read once, every output written once). With n = 2^30 that is 8.59 GB per launch, many times any L2.
#pragma once

#include "device/gate.hpp"
#include "device/buffer.hpp"
#include "device/ladder.hpp"

namespace aisp::ch07::copy {

// What every variant's launch receives.
struct Args {
  const float* src;
  float* dst;
  std::size_t n;
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

class CopyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch07",
            .ladder = "copy",
            .summary = "device-to-device copy of n fp32 elements; bound: DRAM copy bandwidth",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 30,
                      .help = "fp32 elements copied (4 bytes each; default 2^30 = 4 GiB per buffer)",
                      // Odd on purpose: the tests then cover the n % 4 tails of the vector steps.
                      .test_value = (std::int64_t{1} << 20) + 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_src = DeviceBuffer<float>(m_n);
    m_dst = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
  }

  std::vector<TensorView> inputs() const override { return {{"src", m_src.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"dst", m_dst.data(), m_n, DType::f32}}; }
  // A copy's reference is its input: no second buffer of several GB is needed.
  std::vector<TensorView> references() const override { return {{"src", m_src.data(), m_n, DType::f32}}; }

  // A copy is exact: any difference at all is a bug.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override { return {2.0 * sizeof(float) * static_cast<double>(m_n), 0.0}; }

  Args args() const override {
    return {m_src.data(), m_dst.data(), m_n, m_sm_count, m_max_threads_per_sm};
  }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_src;
  DeviceBuffer<float> m_dst;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// The launch geometry every hand-written step shares, so that geometry is not what the ladder compares:
// one full wave of 256-thread blocks (every SM filled to its thread limit).
inline int full_wave_blocks(const Args& a, int threads) {
  return a.sm_count * (a.max_threads_per_sm / threads);
}

}  // namespace aisp::ch07::copy
