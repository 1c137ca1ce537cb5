// ch13:allocator — the contract of the allocator ladder: one training step of `layers` layers whose
// activations and gradients (fixed, seeded sizes between max_count / 512 and max_count fp32 values) are
// allocated in forward order, each touched by a small kernel, and freed in backward order (reference.hpp,
// run_step). The same sequence of sizes every step, as in a training loop; the output is the input's
// "gradient", out = g_0 read back to n values.
//
// The subject is what obtaining and returning that memory costs, not the kernels: every variant runs the
// same kernels in the same order (training_step.cu) and only supplies the memory. cudaMalloc and cudaFree
// are host calls, and cudaFree synchronizes the device before it returns, so their cost is host time and
// a drained GPU, which the GPU clock cannot see: this ladder is timed with the wall clock (launch +
// synchronize on the host, docs/measurement.md), and the allocation calls are inside the measured window
// on purpose. Default mode hot: steps back to back, as a training loop runs them.
//
// Peak memory is the ladder's second measure. The harness has no metric slot for it, so each variant
// reports it as facts (shown in the run's table and stored in results.json "facts"), measured in setup()
// on one warm-up step: the device memory in use at the step's peak minus before it (cudaMemGetInfo after
// every allocation, device-wide), and what the allocator itself says it reserved.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "chapters/ch13_profiling_memory/allocator/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch13::allocator {

// What every variant's launch receives. The step's buffers are not here: obtaining them is the variant's job.
struct Args {
  const float* x;         // plan->n values in [-1, 1)
  float* out;             // plan->n values
  const StepPlan* plan;   // the layer sizes; owned by the problem
  int device;             // the harness's GPU: where a memory pool must place its allocations
};

// How a variant supplies the step's memory. Both calls are made on the host in the step's order, with the
// harness's stream: a stream-ordered allocator enqueues on it, the others may ignore it.
class StepMemory {
 public:
  virtual ~StepMemory() = default;
  virtual void* allocate(std::size_t bytes, cudaStream_t stream) = 0;
  virtual void release(void* ptr, cudaStream_t stream) = 0;
};

// Enqueues one step (training_step.cu): run_step's order, device kernels, memory from `memory`.
void enqueue_training_step(const Args& a, StepMemory& memory, cudaStream_t stream);

// Runs one step through `memory` and returns the growth of the device's used memory at the step's peak
// (cudaMemGetInfo after every allocation, minus before the step). Synchronizes; for setup() only.
std::size_t measure_step_footprint(const Args& a, StepMemory& memory, cudaStream_t stream);

// The trusted device reference (device_reference.cu): the same arithmetic with preallocated buffers.
void step_on_device(const float* x, const StepPlan& plan, float* acts, float* grads, float* out,
                    cudaStream_t stream);

// A byte count as the facts print it.
inline std::string mib_string(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / (1024.0 * 1024.0));
  return text;
}

class AllocatorProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch13",
            .ladder = "allocator",
            .summary = "a training step's activations and gradients allocated and freed every step; bound: "
                       "host cost of allocation (wall clock), and peak memory",
            .axes = {{.name = "layers", .default_value = 64,
                      .help = "layers: activations and gradients allocated per step, one each per layer",
                      .test_value = 12},
                     {.name = "max_count", .default_value = std::int64_t{1} << 21,
                      .help = "largest layer in fp32 values (default 2^21 = 8 MiB; the smallest is 1/512 of it)",
                      .test_value = 6000},
                     {.name = "n", .default_value = std::int64_t{1} << 18,
                      .help = "fp32 values of the input and of the output",
                      .test_value = 1003}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const auto layers = axes.at("layers");
    const auto max_count = axes.at("max_count");
    // run_step keeps one pointer per layer on the host, and the kernels index with 64-bit counts: the
    // limits only keep a typo from asking for a million layers.
    if (layers > 4096) throw UsageError("ch13:allocator: layers must be at most 4096");
    if (max_count > (std::int64_t{1} << 30)) throw UsageError("ch13:allocator: max_count must be at most 2^30");
    m_plan = make_plan(static_cast<std::size_t>(axes.at("n")), static_cast<std::size_t>(layers),
                       static_cast<std::size_t>(max_count));
    const std::size_t total = std::accumulate(m_plan.counts.begin(), m_plan.counts.end(), std::size_t{0});
    const std::size_t largest = *std::max_element(m_plan.counts.begin(), m_plan.counts.end());
    m_x = DeviceBuffer<float>(m_plan.n);
    m_out = DeviceBuffer<float>(m_plan.n);
    m_ref = DeviceBuffer<float>(m_plan.n);
    m_ref_acts = DeviceBuffer<float>(total);
    m_ref_grads = DeviceBuffer<float>(2 * largest);
    m_device = device.index;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, stream);
    step_on_device(m_x.data(), m_plan, m_ref_acts.data(), m_ref_grads.data(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"x", m_x.data(), m_plan.n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_plan.n, DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_plan.n, DType::f32}};
  }

  // Exact: every variant and the reference do the same fp32 operations per element, each rounded once
  // (explicit fmas, the factor a power of two), so a right answer is the same bits. A mismatch is a kernel
  // that read a buffer after it was reused for something else, or before it was written.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // What the kernels must move, the same for every variant: forward i writes c_i values and reads
  // min(c_i, |src|) distinct ones; backward i reads act_i and min(c_i, c_{i+1}) of the upstream gradient
  // (the top layer's upstream is act_{L-1} itself, read once) and writes g_i; the output reads min(n, c_0)
  // and writes n. One fma (2 FLOPs) per forward and per backward element. At the default sizes this is a
  // few hundred MB, a fraction of a millisecond of DRAM time against milliseconds of allocation calls in
  // step 01: % of ceiling is not this ladder's measure; the wall time per step is.
  Work work() const override {
    const auto& c = m_plan.counts;
    double read = 0, written = 0, flops = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const std::size_t src = i == 0 ? m_plan.n : c[i - 1];
      read += static_cast<double>(std::min(c[i], src));
      written += static_cast<double>(c[i]);
      read += static_cast<double>(c[i]);
      if (i + 1 < c.size()) read += static_cast<double>(std::min(c[i], c[i + 1]));
      written += static_cast<double>(c[i]);
      flops += 4.0 * static_cast<double>(c[i]);
    }
    read += static_cast<double>(std::min(m_plan.n, c[0]));
    written += static_cast<double>(m_plan.n);
    return {.bytes = 4.0 * (read + written), .flops = flops, .bytes_read = 4.0 * read,
            .bytes_written = 4.0 * written, .flop_dtype = "fp32"};
  }

  Args args() const override { return {m_x.data(), m_out.data(), &m_plan, m_device}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> x64 = to_host(inputs().front(), stream);
    const std::vector<float> x(x64.begin(), x64.end());
    const std::vector<float> out = step_reference(m_plan, x);
    return compare_on_host("out_ref", to_host(references().front(), stream),
                           std::vector<double>(out.begin(), out.end()), tolerance());
  }

 private:
  StepPlan m_plan;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  DeviceBuffer<float> m_ref_acts;   // the reference's activations, one after another
  DeviceBuffer<float> m_ref_grads;  // the reference's two live gradients
  int m_device = 0;
};

// The facts every variant reports: the schedule's own peak of live requested bytes, for comparison, and the
// device's measured growth over one step.
inline std::vector<Fact> footprint_facts(const Args& a, std::size_t device_peak_bytes) {
  return {{"peak_live_mib", mib_string(static_cast<double>(peak_live_bytes(*a.plan)))},
          {"device_peak_mib", mib_string(static_cast<double>(device_peak_bytes))}};
}

}  // namespace aisp::ch13::allocator
