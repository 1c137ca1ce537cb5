// ch10:cluster_reduction — the contract of the cluster ladder: out = x[0] + ... + x[n-1] for n fp32
// values, with every block summing one tile of 256 * items_per_thread consecutive elements.
//
// The question is where the blocks' partial sums meet. Step 01 sends each block's sum to the result with
// one global atomicAdd: tiles atomics on one address, performed one after another at the L2 slice that
// owns it (ch07:reduction measured ~1.75 ns each on an H200). Step 02 groups 8 blocks into a thread block
// cluster that adds its partials through distributed shared memory, so one atomic per cluster remains.
// That only pays where the atomics are the bottleneck: tiles * ~1.75 ns against the DRAM time of 4 n
// bytes. items_per_thread sets the tile, hence the number of atomics per byte, and its default sweep
// shows both regimes (README). ch07:reduction's answer to the same problem, a grid of one wave whatever
// n, leaves ~1,000 atomics, where clusters have nothing to win.
//
// Bound: the DRAM read bandwidth, 4 n bytes read and 4 written; 1.07 GB at n = 2^28.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/ch10_tensor_cores/cluster_reduction/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch10::cluster_reduction {

// What every variant's launch receives. `out` holds garbage (the gate poisons it) until the variant
// writes it: a variant that accumulates into it zeroes it first, on the stream, inside its launch.
struct Args {
  const float* x;
  float* out;  // one float
  std::size_t n;
  int items_per_thread;  // 4, 8, 16, 32 or 64 (supported_items_per_thread): the tile is 256 times that
};

// The trusted device reference (device_reference.cu): the sum accumulated in double, rounded to float.
void sum_on_device(const float* x, std::size_t n, double* scratch, float* out, cudaStream_t stream);

class ClusterReductionProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch10",
            .ladder = "cluster_reduction",
            .summary = "sum of n fp32 values, one tile per block: atomics vs a cluster's DSMEM; bound: DRAM read",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 28,
                      .help = "fp32 values summed (default 2^28 = 1 GiB)",
                      // Odd: covers the n % 4 tail and a partial last tile; 1,025 tiles at 4 items per
                      // thread, so step 02's last cluster holds 7 empty blocks.
                      .test_value = (std::int64_t{1} << 20) + 3},
                     {.name = "items_per_thread", .default_value = 16,
                      .help = "fp32 values each thread sums (4, 8, 16, 32 or 64): tile = 256 x this",
                      .min_value = 4,
                      .test_value = 4,
                      // From one atomic per 4 KiB (atomic-bound) to one per 64 KiB (DRAM-bound).
                      .default_sweep = {4, 8, 16, 32, 64}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    const std::int64_t items = axes.at("items_per_thread");
    if (!supported_items_per_thread(items)) {
      throw UsageError("ch10:cluster_reduction: items_per_thread must be 4, 8, 16, 32 or 64, got " +
                       std::to_string(items));
    }
    m_items = static_cast<int>(items);
    // One block per tile along x, rounded up to whole clusters: gridDim.x may not pass 2^31 - 1.
    const std::size_t blocks = tile_count(m_n, m_items) + k_cluster_blocks;
    if (blocks > static_cast<std::size_t>(0x7fffffff)) {
      throw UsageError("ch10:cluster_reduction: n = " + std::to_string(m_n) + " needs more than 2^31 - 1 blocks");
    }
    m_x = DeviceBuffer<float>(m_n);
    m_out = DeviceBuffer<float>(1);
    m_ref = DeviceBuffer<float>(1);
    m_scratch = DeviceBuffer<double>(1);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    sum_on_device(m_x.data(), m_n, m_scratch.data(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"sum", m_out.data(), 1, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"sum_ref", m_ref.data(), 1, DType::f32}}; }

  // Ten standard deviations of the rounding error of the orders the steps run (derived in
  // reference.hpp): ~0.6 at n = 2^28 and 16 items per thread, against a sum of typical size
  // sqrt(n) rms ~ 9,500; ~0.005 at the test size. rtol: one fp32 rounding of each side.
  Tolerance tolerance() const override { return {sum_atol(m_n, m_items, uniform_rms()), k_sum_rtol}; }

  Work work() const override {
    const double read = sizeof(float) * static_cast<double>(m_n);
    return {.bytes = read + sizeof(float),
            .flops = static_cast<double>(m_n),  // one fp32 add per element
            .bytes_read = read,
            .bytes_written = sizeof(float),
            .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_out.data(), m_n, m_items}; }

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
  int m_items = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  DeviceBuffer<double> m_scratch;
};

}  // namespace aisp::ch10::cluster_reduction
