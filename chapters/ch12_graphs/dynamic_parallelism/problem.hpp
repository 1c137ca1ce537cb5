// ch12:dynamic_parallelism — the contract of the adaptive-sampling ladder: for each of `cells` cells a
// parent kernel decides the cell's sample count from its input (n = 1,024 * 2^floor(r), reference.hpp),
// and a child grid of n / 1,024 blocks integrates the cell's peak with that many samples. Outputs: the
// sample counts (exact) and the integrals.
//
// The work is decided on the device, so the launches that do it must be configured from data the host
// does not have. The ladder compares the two ways to launch the children: the host reads the decisions
// back (a D2H copy and a synchronize) and launches one child per cell (step 01), or each parent thread
// launches its cell's child itself with CUDA dynamic parallelism (step 02). Both launch the same child
// kernel with the same grids, and compute the same sums in the same order within a block.
//
// Clock: wall, for both steps (a target has one clock). Step 01's read-back and synchronize are its
// subject, and its launch() waits on its own work, which the gpu clock's blocking kernel cannot hold.
// Step 02's launch() returns at once, and the wall clock then spans its one launch, the device-side
// launches, the children and the harness's synchronize: the same interval as step 01's, from the first
// host call to the last child's end. Mode: hot (the data, a few KB of inputs and outputs, is not the
// subject). Inside the measured window: everything a variant does per launch, step 01's copy,
// synchronize and host loop included; outside it: pinned buffers allocated in setup().
//
// No bytes or FLOPs are declared: the samples depend on the seed, and the bound is per child launch
// (README): a host launch plus a share of the round trip against a device-side launch.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch12_graphs/dynamic_parallelism/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch12::dynamic_parallelism {

struct Args {
  const float* r;         // cells values in [0, k_levels): the cell's sharpness exponent
  std::int32_t* sizes;    // cells: the parent's decision, the samples of each cell (output)
  float* out;             // cells: each cell's integral (output)
  int cells;
};

// The parent grid's blocks: one thread per cell.
inline constexpr int k_parent_threads = 256;

// The device's pending-launch buffer holds 2,048 launches by default (cudaLimitDevRuntimePendingLaunchCount):
// step 02 has up to one child per cell in flight, so the axis stops there instead of changing a
// context-wide limit behind the other ladders' backs.
inline constexpr std::int64_t k_max_cells = 2048;

// The trusted device reference (device_reference.cu): one block per cell, sums in double, launched from
// the host as one plain kernel; neither a read-back nor a device-side launch.
void integrate_on_device(const float* r, int cells, std::int32_t* sizes, float* out, cudaStream_t stream);

class DynamicParallelismProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch12",
            .ladder = "dynamic_parallelism",
            .summary = "device-decided work: host reads the sizes back and launches the children vs "
                       "device-launched children (CDP2; wall clock)",
            .axes = {{.name = "cells",
                      .default_value = 1024,
                      .help = "cells, one child grid each, of 1,024 to 1,048,576 samples (at most 2,048)",
                      .test_value = 40}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& /*device*/) override {
    const std::int64_t cells = axes.at("cells");
    if (cells > k_max_cells) {
      throw UsageError("ch12:dynamic_parallelism: cells must be at most 2048 (the device's pending-launch limit)");
    }
    m_cells = static_cast<int>(cells);
    m_r = DeviceBuffer<float>(count());
    m_sizes = DeviceBuffer<std::int32_t>(count());
    m_out = DeviceBuffer<float>(count());
    m_sizes_ref = DeviceBuffer<std::int32_t>(count());
    m_out_ref = DeviceBuffer<float>(count());
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, 0.0, static_cast<double>(k_levels), stream);
    integrate_on_device(m_r.data(), m_cells, m_sizes_ref.data(), m_out_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"r", m_r.data(), count(), DType::f32}}; }
  std::vector<TensorView> outputs() const override {
    return {{"out", m_out.data(), count(), DType::f32}, {"sizes", m_sizes.data(), count(), DType::i32}};
  }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_out_ref.data(), count(), DType::f32},
            {"sizes_ref", m_sizes_ref.data(), count(), DType::i32}};
  }

  // Sums of positive samples: a relative bound for any order (reference.hpp), ~6.2e-5. On the sizes,
  // powers of two, any wrong decision is off by a factor of 2 at least, far outside it.
  Tolerance tolerance() const override { return {0.0, relative_tolerance()}; }

  Work work() const override { return {}; }  // see the comment at the top

  Args args() const override { return {m_r.data(), m_sizes.data(), m_out.data(), m_cells}; }

  bool has_host_reference() const override { return true; }
  // The host recomputes every cell from r: the sizes must match exactly; the integrals within 1e-5
  // relative (the host's exp2 may round the sharpness an ulp or two away from the device's exp2f).
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto r = to_host(inputs().front(), stream);
    std::vector<double> want_sizes(count()), want_out(count());
    for (std::size_t i = 0; i < count(); ++i) {
      const auto ri = static_cast<float>(r[i]);
      const std::int32_t n = samples_of(ri);
      want_sizes[i] = n;
      want_out[i] = static_cast<float>(cell_reference(std::exp2(2.0f * ri), n));
    }
    const auto refs = references();
    std::string why = compare_on_host("sizes_ref", to_host(refs[1], stream), want_sizes, {0.0, 0.0});
    if (why.empty()) why = compare_on_host("out_ref", to_host(refs[0], stream), want_out, {0.0, 1e-5});
    return why;
  }

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_cells); }

  int m_cells = 0;
  DeviceBuffer<float> m_r;
  DeviceBuffer<std::int32_t> m_sizes;
  DeviceBuffer<float> m_out;
  DeviceBuffer<std::int32_t> m_sizes_ref;
  DeviceBuffer<float> m_out_ref;
};

}  // namespace aisp::ch12::dynamic_parallelism
