// ch06:launch_bounds — the contract of the launch_bounds ladder: mix the 8 channels of every pixel with
// one 8x8 matrix, y[p] = M x[p] (reference.hpp), for `pixels` pixels of 8 fp32 channels.
//
// A memory-bound kernel whose threads hold a lot of state: each keeps the 64 matrix entries in registers
// for its whole life, so it needs ~90 registers per thread, and registers, not threads, decide how many
// warps an SM holds. This ladder keeps the kernel and the block size (256) and changes only what the
// compiler is told about registers (__launch_bounds__), reporting registers, spill bytes and the
// occupancy the runtime predicts beside each time (the variants' facts).
// Declared work: 32 bytes read and 32 written per pixel (the matrix is 256 bytes, read once per thread
// from L2, not counted), 64 FMAs = 128 FLOPs per pixel (4 FLOP/byte: DRAM-bound). With 2^25 pixels,
// 2.15 GB per launch, measured cold.
#pragma once

#include "chapters/ch06_cuda_basics/launch_bounds/reference.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/kernel_facts.hpp"
#include "device/ladder.hpp"

namespace aisp::ch06::launch_bounds {

struct Args {
  const float* x;  // pixels * 8, pixel-major
  const float* m;  // 8 x 8, row-major
  float* y;        // pixels * 8
  std::size_t pixels;
  int sm_count;
};

// The trusted device reference (device_reference.cu): one thread per output value, matrix from global.
void mix_reference(const Args& a, float* ref, cudaStream_t stream);

class LaunchBoundsProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch06",
            .ladder = "launch_bounds",
            .summary = "8x8 channel mix per pixel, 64 matrix registers per thread; the same kernel with and "
                       "without __launch_bounds__",
            .axes = {{.name = "pixels", .default_value = std::int64_t{1} << 25,
                      .help = "pixels of 8 fp32 channels (default 2^25: 1 GiB in, 1 GiB out)",
                      .test_value = 100003}},  // odd: a partial last wave of threads
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_pixels = static_cast<std::size_t>(axes.at("pixels"));
    m_x = DeviceBuffer<float>(m_pixels * k_channels);
    m_m = DeviceBuffer<float>(k_channels * k_channels);
    m_y = DeviceBuffer<float>(m_pixels * k_channels);
    m_ref = DeviceBuffer<float>(m_pixels * k_channels);
    m_sm_count = device.sm_count;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ull, -1.0, 1.0, stream);
    mix_reference(args(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), m_x.size(), DType::f32}, {"m", m_m.data(), m_m.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_y.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), m_ref.size(), DType::f32}};
  }

  // Every variant and the reference sum the 8 products of a row in channel order with fmaf: the results
  // are bit-identical, whatever the registers; a spill moves values, it does not change arithmetic.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  Work work() const override {
    const double p = static_cast<double>(m_pixels);
    Work w;
    w.bytes_read = sizeof(float) * k_channels * p;
    w.bytes_written = sizeof(float) * k_channels * p;
    w.bytes = w.bytes_read + w.bytes_written;
    w.flops = 2.0 * k_channels * k_channels * p;
    w.flop_dtype = "fp32";
    return w;
  }

  Args args() const override { return {m_x.data(), m_m.data(), m_y.data(), m_pixels, m_sm_count}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto x = to_host(inputs()[0], stream);
    const auto m = to_host(inputs()[1], stream);
    return compare_on_host("y_ref", to_host(references().front(), stream), mix_channels(x, m), tolerance());
  }

 private:
  std::size_t m_pixels = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_m;
  DeviceBuffer<float> m_y;
  DeviceBuffer<float> m_ref;
  int m_sm_count = 0;
};

// Every step launches 256-thread blocks, as many as fit on the GPU at once by the occupancy API, so each
// step gets the grid its own register count allows (a full wave) and the block size never changes.
inline constexpr int k_block = 256;

inline int full_wave_blocks(const Args& a, const void* kernel) {
  int per_sm = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_block, 0));
  return a.sm_count * (per_sm > 0 ? per_sm : 1);
}

}  // namespace aisp::ch06::launch_bounds
