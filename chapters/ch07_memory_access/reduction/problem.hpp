// ch07:reduction — the contract of the sum ladder: out = x[0] + x[1] + ... + x[n-1] for n fp32 values.
//
// Every element must be read once and the answer is one number, so the bound is the DRAM read
// bandwidth: 4 * n bytes read, 4 written. With n = 2^28 that is 1.07 GB per launch, many times any L2.
// The ladder is about how many threads must agree on one number: through one address (atomics), through
// shared memory, through registers (warp shuffles), and how much work each thread does before it asks.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/ch07_memory_access/reduction/reference.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch07::reduction {

// What every variant's launch receives. `out` holds garbage (the gate poisons it) until the variant
// writes it: a variant that accumulates into it zeroes it first, on the stream, inside its launch.
struct Args {
  const float* x;
  float* out;  // one float
  std::size_t n;
  int sm_count;  // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): the sum accumulated in double, rounded to float.
void sum_on_device(const float* x, std::size_t n, double* scratch, float* out, cudaStream_t stream);

class ReductionProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch07",
            .ladder = "reduction",
            .summary = "sum of n fp32 values into one; bound: DRAM read bandwidth",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 values summed (default 2^28 = 1 GiB)",
                      // Odd: the tests cover the n % 4 tail of the vector step, and more than one
                      // grid-stride round of it on a full GPU.
                      .test_value = (std::int64_t{1} << 22) + 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_x = DeviceBuffer<float>(m_n);
    m_out = DeviceBuffer<float>(1);
    m_ref = DeviceBuffer<float>(1);
    m_scratch = DeviceBuffer<double>(1);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    sum_on_device(m_x.data(), m_n, m_scratch.data(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"sum", m_out.data(), 1, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"sum_ref", m_ref.data(), 1, DType::f32}}; }

  // Summation order changes an fp32 sum: atol = 3 u n rms (u = 2^-24, rms = 1/sqrt(3) for the uniform
  // inputs), ten standard deviations of a running fp32 sum's error; the derivation, and why the classic
  // worst-case bounds are useless at this size, are in reference.hpp. ~28 at n = 2^28 against a sum of
  // typical size ~9,500; 0.58 at the test size. No rtol: the sum of mean-zero inputs may be near 0.
  Tolerance tolerance() const override { return {sum_atol(m_n, uniform_rms()), 0.0}; }

  Work work() const override {
    const double read = sizeof(float) * static_cast<double>(m_n);
    return {.bytes = read + sizeof(float),
            .flops = static_cast<double>(m_n),  // one fp32 add per element
            .bytes_read = read,
            .bytes_written = sizeof(float),
            .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_out.data(), m_n, m_sm_count, m_max_threads_per_sm}; }

  bool has_host_reference() const override { return true; }
  // The device's double sum and the host's compensated one differ by a few double roundings at most, so
  // after rounding to float they agree to one float ulp.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const double host = sum_reference(to_host(inputs().front(), stream));
    const std::vector<double> want = {static_cast<double>(static_cast<float>(host))};
    return compare_on_host("sum_ref", to_host(references().front(), stream), want, {1e-30, 1.0 / 8388608.0});
  }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  DeviceBuffer<double> m_scratch;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// The launch geometry of the steps that give each thread many elements: one full wave of blocks.
inline int full_wave_blocks(const Args& a, int threads) { return a.sm_count * (a.max_threads_per_sm / threads); }

}  // namespace aisp::ch07::reduction
