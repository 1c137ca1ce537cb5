// ch06:occupancy — the contract of the occupancy ladder: y[i] = alpha * x[i] + beta over n fp32
// elements (reference.hpp), with the block size as an axis.
//
// A memory-bound kernel for looking at occupancy: the `block` axis (threads per block) is swept by
// default over 64..1024, and every variant reports, beside its time, the registers of its kernel and
// the occupancy the runtime predicts for that block size (its facts). `aisp tools occupancy-tuning
// --targets ch06:occupancy` prints the sweep as one table. Declared work: 4n bytes read, 4n written;
// with n = 2^28 (1 GiB per tensor) 2.15 GB per launch, measured cold. Bound: DRAM copy bandwidth.
#pragma once

#include <stdexcept>

#include "chapters/ch06_cuda_basics/occupancy/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/kernel_facts.hpp"
#include "device/ladder.hpp"

namespace aisp::ch06::occupancy {

struct Args {
  const float* x;
  float* y;
  std::size_t n;
  int block;     // threads per block: the swept axis
  int sm_count;  // from the device
};

// The trusted device reference (device_reference.cu): one thread per element.
void affine_reference(const Args& a, float* ref, cudaStream_t stream);

class OccupancyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch06",
            .ladder = "occupancy",
            .summary = "y = alpha x + beta over n fp32, block size swept 64..1024 with predicted occupancy; "
                       "bound: DRAM",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements (default 2^28 = 1 GiB per tensor)",
                      .test_value = (std::int64_t{1} << 20) + 3},  // odd: the float4 tails
                     {.name = "block", .default_value = 256,
                      .help = "threads per block, a multiple of 32 up to 1024",
                      .min_value = 32,
                      .test_value = 96,  // not a power of two: geometry must not assume one
                      .default_sweep = {64, 128, 256, 512, 1024}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_block = static_cast<int>(axes.at("block"));
    if (m_block % 32 != 0 || m_block > 1024) {
      throw std::invalid_argument("block must be a multiple of 32 from 32 to 1024");
    }
    m_x = DeviceBuffer<float>(m_n);
    m_y = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
    m_sm_count = device.sm_count;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    affine_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"y_ref", m_ref.data(), m_n, DType::f32}}; }

  // One fmaf per element everywhere (one rounding): bit-identical to the reference.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double n = static_cast<double>(m_n);
    Work w;
    w.bytes_read = sizeof(float) * n;
    w.bytes_written = sizeof(float) * n;
    w.bytes = w.bytes_read + w.bytes_written;
    return w;
  }

  Args args() const override { return {m_x.data(), m_y.data(), m_n, m_block, m_sm_count}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(inputs().front(), stream);
    return compare_on_host("y_ref", to_host(references().front(), stream), affine(x), tolerance());
  }

 private:
  std::size_t m_n = 0;
  int m_block = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
};

// One full wave for `kernel` at this block size, sized by the occupancy API (CUDA C++ Programming
// Guide, "Occupancy Calculator"): as many blocks as can be resident at once on every SM.
inline int occupancy_grid(const Args& a, const void* kernel) {
  int per_sm = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, a.block, 0));
  return a.sm_count * (per_sm > 0 ? per_sm : 1);
}

// Registers, spills and the predicted occupancy of `kernel` at the axis' block size.
inline std::vector<Fact> occupancy_facts(const Args& a, const void* kernel) {
  return standard_facts(kernel_facts(kernel, a.block));
}

}  // namespace aisp::ch06::occupancy
