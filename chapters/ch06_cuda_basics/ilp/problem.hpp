// ch06:ilp — the contract of the ilp ladder: n independent chains of `iters` dependent FMAs each,
// y[i] = f^iters(x[i]) with f(v) = fma(v, a, b) (reference.hpp).
//
// A compute-bound lesson in latency: an FFMA's result is ready ~4 cycles after issue, and each of an
// SM's four schedulers can issue one warp instruction per cycle. A warp whose next FMA depends on its
// last one issues once per ~4 cycles; only other warps (occupancy) or other independent FMAs of the same
// warp (instruction-level parallelism) fill the gap. This ladder fixes the threads at `warps_per_sm`
// warps per SM (default 4: one per scheduler, as a register-hungry kernel might run) and varies only the
// number of independent chains each thread keeps in flight.
// Declared work: 2 * n * iters FLOPs (one FMA = 2) in fp32, placed against the measured FP32 peak; bytes
// 4n read + 4n written, negligible beside the FLOPs (intensity ~ iters / 4 FLOP per byte).
#pragma once

#include <stdexcept>

#include "chapters/ch06_cuda_basics/ilp/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch06::ilp {

struct Args {
  const float* x;
  float* y;
  std::size_t n;
  int iters;
  int sm_count;      // from the device
  int warps_per_sm;  // threads per SM / 32: one block of warps_per_sm * 32 threads per SM
};

// The trusted device reference (device_reference.cu): one thread per element, one chain each.
void chains_reference(const Args& a, float* ref, cudaStream_t stream);

class IlpProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch06",
            .ladder = "ilp",
            .summary = "n chains of dependent fp32 FMAs at 4 warps/SM, 1 to 8 chains per thread; bound: FP32 peak",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 20,
                      .help = "independent chains (elements), one fp32 in and out each",
                      .test_value = 20011},  // odd and prime: partial groups of chains in every step
                     {.name = "iters", .default_value = 8192,
                      .help = "dependent FMAs per chain", .test_value = 100},
                     {.name = "warps_per_sm", .default_value = 4,
                      .help = "warps per SM (one block per SM; 4 = one per scheduler; at most 32)",
                      .test_value = 4}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_iters = static_cast<int>(axes.at("iters"));
    m_warps_per_sm = static_cast<int>(axes.at("warps_per_sm"));
    if (m_warps_per_sm > 32) throw std::invalid_argument("warps_per_sm must be at most 32 (1024 threads per block)");
    m_x = DeviceBuffer<float>(m_n);
    m_y = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    chains_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"y_ref", m_ref.data(), m_n, DType::f32}}; }

  // Every variant runs each element's chain in the same order with fmaf (one rounding per step), so the
  // results are bit-identical to the reference; interleaving chains changes the schedule, not the math.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_n);
    Work w;
    w.flops = 2.0 * n * m_iters;
    w.flop_dtype = "fp32";
    w.bytes_read = sizeof(float) * n;
    w.bytes_written = sizeof(float) * n;
    w.bytes = w.bytes_read + w.bytes_written;
    return w;
  }

  Args args() const override { return {m_x.data(), m_y.data(), m_n, m_iters, m_sm_count, m_warps_per_sm}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(inputs().front(), stream);
    return compare_on_host("y_ref", to_host(references().front(), stream), chains(x, m_iters), tolerance());
  }

 private:
  std::size_t m_n = 0;
  int m_iters = 0;
  int m_warps_per_sm = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
};

// The geometry every step shares: one block per SM of warps_per_sm warps, so that each scheduler holds
// warps_per_sm / 4 warps and the steps differ only in the chains per thread.
inline int block_threads(const Args& a) { return 32 * a.warps_per_sm; }

}  // namespace aisp::ch06::ilp
