// ch09:intensity — the contract of the roofline sweep: y[i] = f^F(x[i]), f(v) = fma(v, alpha, beta) in
// FP32, for n elements, with F = fma_per_elem swept from 1 to 256.
//
// Each element costs 8 bytes of DRAM traffic (read x, write y) and 2 F FLOPs, so the arithmetic intensity
// is F / 4 FLOP/byte: 0.25 to 64 across the sweep. Time is flat while the kernel is memory-bound
// (bytes / DRAM bandwidth), then grows with F once it is compute-bound (FLOPs / FP32 peak). The ridge
// point where the two bounds meet is FP32 peak / DRAM bandwidth: ~61 TFLOP/s / ~4.4 TB/s = ~14 FLOP/byte
// on an H200, F ~ 55. The sweep measures where the turn really is (README).
//
// Every FMA feeds the next one, with alpha and beta passed at run time, so the compiler can neither fold
// nor drop any of them (the SASS of 01_fma_chain has 16 FFMAs per unrolled chain step per element pair).
#pragma once

#include <string>

#include "chapters/ch09_intensity_fusion/intensity/reference.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch09::intensity {

struct Args {
  const float* x;
  float* y;
  std::size_t n;
  int fma_per_elem;
  float alpha, beta;
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The obviously correct device reference: one thread per element, the chain written out plainly.
__global__ void fma_chain_reference_kernel(const float* __restrict__ x, float* __restrict__ y,
                                           std::size_t n, int fma_per_elem, float alpha, float beta);

class IntensityProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch09",
            .ladder = "intensity",
            .summary = "y = F chained FP32 FMAs of x, F swept: the roofline's memory-to-compute turn",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements (default 2^28: 1 GiB in, 1 GiB out per launch)",
                      // Odd on purpose: the test covers the n % 4 tail of the float4 path.
                      .test_value = (std::int64_t{1} << 20) + 3},
                     {.name = "fma_per_elem", .default_value = 64,
                      .help = "chained FMAs per element: 2 F FLOPs per 8 bytes (intensity F/4 FLOP/B)",
                      .test_value = 7,
                      .default_sweep = {1, 2, 4, 8, 16, 32, 64, 128, 256}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_fma = static_cast<int>(axes.at("fma_per_elem"));
    m_x = DeviceBuffer<float>(m_n);
    m_y = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override;

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"y_ref", m_ref.data(), m_n, DType::f32}}; }

  // Exact: the same FMAs in the same order give the same bits (IEEE fma, round to nearest, no FTZ).
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double bytes = 4.0 * static_cast<double>(m_n);
    return {.bytes = 2.0 * bytes,
            .flops = 2.0 * m_fma * static_cast<double>(m_n),
            .bytes_read = bytes,
            .bytes_written = bytes,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_y.data(), m_n, m_fma, k_alpha, k_beta, m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto want = reference_chain(to_host(inputs()[0], stream), m_fma);
    return compare_on_host("y_ref", to_host(references()[0], stream), want, tolerance());
  }

 private:
  std::size_t m_n = 0;
  int m_fma = 0;
  DeviceBuffer<float> m_x, m_y, m_ref;
  int m_sm_count = 0, m_max_threads_per_sm = 0;
};

}  // namespace aisp::ch09::intensity
