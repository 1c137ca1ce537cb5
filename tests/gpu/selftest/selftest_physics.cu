// selftest:physics — a hidden ladder that exists to make the physics check fire
// (docs/measurement.md "Declared work, ceilings and the physics check"): an honest copy whose problem
// declares `inflate` times the bytes it moves. With the default inflate=10 the copy claims ten times the
// DRAM bandwidth and must be IMPLAUSIBLE; with inflate=1 it must PASS with a sane % of the DRAM ceiling.
// Compiled only into aisp_gpu_tests (tests/gpu/test_physics.cpp); never part of the curriculum.
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::selftest::physics {

struct Args {
  const float* src;
  float* dst;
  std::size_t n;
  int blocks;
};

class InflatedCopyProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "selftest",
            .ladder = "physics",
            .summary = "physics-check self-test: an honest copy with its declared bytes multiplied by `inflate`",
            // 2^25 floats: 128 MiB per buffer, 256 MiB moved, several times any L2, so the DRAM floor holds.
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 25, .help = "fp32 elements"},
                     {.name = "inflate", .default_value = 10, .help = "factor on the declared bytes"}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold,
            .hidden = true};
  }
  void allocate(const AxisValues& axes, const DeviceFacts& d) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_inflate = static_cast<double>(axes.at("inflate"));
    m_src = DeviceBuffer<float>(m_n);
    m_dst = DeviceBuffer<float>(m_n);
    m_blocks = d.sm_count * (d.max_threads_per_sm / 256);
  }
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
  }
  std::vector<TensorView> inputs() const override { return {{"src", m_src.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"dst", m_dst.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return inputs(); }
  Tolerance tolerance() const override { return {0.0, 0.0}; }
  // The lie under test: `inflate` times the 8 bytes per element that really cross DRAM.
  Work work() const override { return {.bytes = m_inflate * 8.0 * static_cast<double>(m_n)}; }
  Args args() const override { return {m_src.data(), m_dst.data(), m_n, m_blocks}; }

 private:
  std::size_t m_n = 0;
  double m_inflate = 1;
  DeviceBuffer<float> m_src;
  DeviceBuffer<float> m_dst;
  int m_blocks = 0;
};

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    dst[i] = src[i];
  }
}

__global__ void tail_kernel(const float* src, float* dst, std::size_t from, std::size_t n) {
  const std::size_t i = from + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

void launch(const Args& a, cudaStream_t s) {
  copy_kernel<<<a.blocks, 256, 0, s>>>(reinterpret_cast<const float4*>(a.src), reinterpret_cast<float4*>(a.dst),
                                       a.n / 4);
  AISP_CHECK_LAUNCH();
  if (a.n % 4) {
    tail_kernel<<<1, 4, 0, s>>>(a.src, a.dst, a.n / 4 * 4, a.n);
    AISP_CHECK_LAUNCH();
  }
}

AISP_REGISTER_VARIANT(InflatedCopyProblem, launch, .step = 1, .slug = "copy", .kind = VariantKind::baseline,
                      .summary = "an honest float4 copy; the problem inflates its declared bytes");

}  // namespace aisp::selftest::physics
