// ch08:divergence — the contract of the divergence ladder: y[i] = p(x[i]) for n fp32 values of mixed
// sign, where the sign of x picks which coefficients the polynomial uses (reference.hpp).
//
// The inputs are uniform in [-1, 1), so in every warp about half the lanes take each branch: the
// worst case for a branchy kernel, and the usual case for activation-like functions with a sign test.
// The work is built to be compute-bound, so that time spent on both sides of a branch shows: per element
// `terms` iterations of two FMAs (4 FLOPs), against 8 bytes of DRAM traffic. With the defaults (n = 2^26,
// terms = 128) that is 34.4 GFLOP (fp32) and 0.54 GB: 0.56 ms at the measured FMA rate (~61 TFLOP/s on
// an H200) against 0.12 ms of DRAM time. The declared FLOPs count only the branch each element takes.
#pragma once

#include "chapters/ch08_occupancy_pipelines/divergence/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch08::divergence {

struct Args {
  const float* x;
  float* y;
  std::size_t n;
  std::int64_t terms;
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): the function as written in reference.hpp.
void evaluate_reference(const Args& a, float* ref, cudaStream_t stream);

class DivergenceProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch08",
            .ladder = "divergence",
            .summary = "sign-dependent polynomial over mixed-sign fp32; bound: fp32 FMA throughput",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 26,
                      .help = "fp32 elements (default 2^26 = 256 MiB per buffer)",
                      .test_value = (std::int64_t{1} << 16) + 3},
                     {.name = "terms", .default_value = 128,
                      .help = "polynomial terms per element (2 FMAs each)", .test_value = 7}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_terms = axes.at("terms");
    m_x = DeviceBuffer<float>(m_n);
    m_y = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    evaluate_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"y_ref", m_ref.data(), m_n, DType::f32}}; }

  // Every step performs the same fused multiply-adds in the same order (the lesson is where the branch
  // goes, not the arithmetic), so the outputs must agree bit for bit: zero tolerance.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_n);
    return {.bytes = 8.0 * n,
            .flops = 4.0 * static_cast<double>(m_terms) * n,
            .bytes_read = 4.0 * n,
            .bytes_written = 4.0 * n,
            .flop_dtype = "fp32"};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(inputs().front(), stream);
    const auto ref = to_host(references().front(), stream);
    return compare_on_host("y_ref", ref, evaluate(x, m_terms), tolerance());
  }

  Args args() const override { return {m_x.data(), m_y.data(), m_n, m_terms, m_sm_count, m_max_threads_per_sm}; }

 private:
  std::size_t m_n = 0;
  std::int64_t m_terms = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// One full wave of `threads`-thread blocks, as in ch07:copy: geometry is not what this ladder compares.
inline int full_wave_blocks(const Args& a, int threads) { return a.sm_count * (a.max_threads_per_sm / threads); }

}  // namespace aisp::ch08::divergence
