// ch06:vector_add — the contract of the vector_add ladder: c[i] = a[i] + b[i] for n fp32 elements.
//
// The "hello world" of CUDA, and still a useful lesson: it does one add per 12 bytes, so its only bound
// is DRAM. Declared work: 2 * 4 * n bytes read (a and b, each once) and 4 * n written (c), FLOPs
// negligible and not declared. With n = 2^28 (1 GiB per tensor) that is 3.22 GB per launch, many times
// any L2, measured cold; the ceiling is the DRAM copy bandwidth of `aisp hw peaks` (two thirds of the
// bytes are reads, which places it against the copy mix).
#pragma once

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"
#include "chapters/ch06_cuda_basics/vector_add/reference.hpp"

namespace aisp::ch06::vector_add {

// What every variant's launch receives.
struct Args {
  const float* a;
  const float* b;
  float* c;
  std::size_t n;
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): one thread per element, the plain kernel.
void add_reference(const Args& a, float* ref, cudaStream_t stream);

class VectorAddProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch06",
            .ladder = "vector_add",
            .summary = "c = a + b over n fp32 elements; bound: DRAM bandwidth (2 reads, 1 write)",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements per tensor (default 2^28 = 1 GiB per tensor, three tensors)",
                      // Odd on purpose: the tests then cover the n % 4 tails of the vector steps.
                      .test_value = (std::int64_t{1} << 20) + 3}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_a = DeviceBuffer<float>(m_n);
    m_b = DeviceBuffer<float>(m_n);
    m_c = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    // Two different streams of values: a == b would let a variant read one input twice and pass.
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ull, -1.0, 1.0, stream);
    add_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_n, DType::f32}, {"b", m_b.data(), m_n, DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"c_ref", m_ref.data(), m_n, DType::f32}}; }

  // One correctly rounded fp32 add per element, the same in every variant and in the reference: any
  // difference at all is a bug.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_n);
    Work w;
    w.bytes_read = 2.0 * sizeof(float) * n;
    w.bytes_written = sizeof(float) * n;
    w.bytes = w.bytes_read + w.bytes_written;
    return w;
  }

  Args args() const override {
    return {m_a.data(), m_b.data(), m_c.data(), m_n, m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto a = to_host(inputs()[0], stream);
    const auto b = to_host(inputs()[1], stream);
    return compare_on_host("c_ref", to_host(references().front(), stream), add(a, b), tolerance());
  }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_a;
  DeviceBuffer<float> m_b;
  DeviceBuffer<float> m_c;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// The launch geometry the grid-stride steps share, so that geometry is not what they compare: one full
// wave of `threads`-thread blocks (every SM filled to its thread limit).
inline int full_wave_blocks(const Args& a, int threads) {
  return a.sm_count * (a.max_threads_per_sm / threads);
}

}  // namespace aisp::ch06::vector_add
