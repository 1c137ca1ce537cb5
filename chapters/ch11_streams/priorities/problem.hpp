// ch11:priorities — the contract of the stream-priority ladder: bulk work (a DRAM copy of n fp32 values,
// many short blocks) and a latency-critical chain of `steps` small dependent kernels (one block each) are
// issued together on two streams; the launch ends when both are done.
//
// The block scheduler hands out thread blocks in priority order, then in submission order: a kernel of
// equal priority queued while a big grid still has blocks to hand out waits until that grid's last
// blocks are dispatched. Each kernel of the chain arrives while the copy's blocks are queued, so at equal
// priority the chain runs after the copy (or one kernel of it before); from a higher-priority stream its
// blocks take the next free slot as copy blocks retire, and the chain runs inside the copy's time.
//
// What is timed: the harness times one interval per launch, not the latency of a kernel inside it, so
// this ladder times the makespan of the pair: copy + chain when the chain waits, about max(copy, chain)
// when it does not. The difference between the steps is the time the critical chain spent queued behind
// bulk work. (A p50/p99 of the single critical kernel's latency would need timestamps inside the launch,
// which the harness does not take; see README.md.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch11_streams/priorities/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch11::priorities {

// Threads of the critical kernel's one block: the chain's state holds one value per thread.
inline constexpr int k_critical_threads = 256;

struct Args {
  const float* src;  // bulk input, n values
  float* dst;        // bulk output, n values
  std::size_t n;
  const float* x;    // critical input, k_critical_threads values in [-1/2, 1/2)
  float* state;      // critical output, k_critical_threads values
  int steps;         // kernels in the critical chain
  int fmas;          // dependent fmas per thread in each critical kernel
};

// The trusted device reference of the chain (device_reference.cu): one block computing the whole chain.
void chain_on_device(const float* x, float* state_ref, int steps, int fmas, cudaStream_t stream);

class PrioritiesProblem final : public Problem<Args> {
 public:
  static constexpr std::int64_t k_max_steps = 4096;
  static constexpr std::int64_t k_max_fmas = std::int64_t{1} << 20;

  static TargetInfo target_info() {
    return {.chapter = "ch11",
            .ladder = "priorities",
            .summary = "a chain of small critical kernels beside a bulk DRAM copy; bound: the copy's DRAM time",
            .axes = {{.name = "n",
                      .default_value = std::int64_t{1} << 28,
                      .help = "fp32 elements of the bulk copy (default 2^28: 1 GiB read, 1 GiB written)",
                      .test_value = (std::int64_t{1} << 20) + 3},
                     {.name = "steps",
                      .default_value = 128,
                      .help = "small dependent kernels in the critical chain",
                      .test_value = 5},
                     {.name = "fmas",
                      .default_value = 1024,
                      .help = "dependent fused multiply-adds per thread in each critical kernel",
                      .test_value = 64}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& /*device*/) override {
    if (axes.at("steps") > k_max_steps) {
      throw UsageError("ch11:priorities: steps must be at most " + std::to_string(k_max_steps));
    }
    if (axes.at("fmas") > k_max_fmas) {
      throw UsageError("ch11:priorities: fmas must be at most " + std::to_string(k_max_fmas));
    }
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_steps = static_cast<int>(axes.at("steps"));
    m_fmas = static_cast<int>(axes.at("fmas"));
    m_src = DeviceBuffer<float>(m_n);
    m_dst = DeviceBuffer<float>(m_n);
    m_x = DeviceBuffer<float>(k_critical_threads);
    m_state = DeviceBuffer<float>(k_critical_threads);
    m_state_ref = DeviceBuffer<float>(k_critical_threads);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -1.0, 1.0, stream);
    fill_uniform(in[1], seed ^ 0x9E3779B97F4A7C15ull, -0.5, 0.5, stream);
    chain_on_device(m_x.data(), m_state_ref.data(), m_steps, m_fmas, stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"src", m_src.data(), m_n, DType::f32}, {"x", m_x.data(), k_critical_threads, DType::f32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"dst", m_dst.data(), m_n, DType::f32}, {"state", m_state.data(), k_critical_threads, DType::f32}};
  }
  // The copy's reference is its input; the chain's is computed by the device reference.
  std::vector<TensorView> references() const override {
    return {{"src", m_src.data(), m_n, DType::f32},
            {"state_ref", m_state_ref.data(), k_critical_threads, DType::f32}};
  }

  // Exact for both outputs: a copy is exact, and the chain's kernels and its reference do the same fmas and
  // adds in the same order, each rounded once.
  Tolerance tolerance() const override { return {0.0, 0.0}; }

  // The copy reads and writes n x 4 bytes each; the chain reads its 1 KiB input and reads and writes its
  // 1 KiB state per step (from L2, but counted). FLOPs: the chain's, 2 per fma and one add per later step,
  // negligible against the copy. The floor is the copy at the DRAM copy ceiling: a perfect schedule hides
  // the whole chain inside it.
  Work work() const override {
    const double copy = sizeof(float) * static_cast<double>(m_n);
    const double chain = sizeof(float) * k_critical_threads * static_cast<double>(m_steps);
    return {.bytes = 2 * copy + 3 * chain,
            .flops = static_cast<double>(k_critical_threads) * m_steps * (2.0 * m_fmas + 1.0),
            .bytes_read = copy + 2 * chain,
            .bytes_written = copy + chain,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_src.data(), m_dst.data(), m_n, m_x.data(), m_state.data(), m_steps, m_fmas};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> want = chain_reference(to_host(inputs()[1], stream), m_steps, m_fmas);
    return compare_on_host("state_ref", to_host(references()[1], stream), want, tolerance());
  }

 private:
  std::size_t m_n = 0;
  int m_steps = 0;
  int m_fmas = 0;
  DeviceBuffer<float> m_src;
  DeviceBuffer<float> m_dst;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_state;
  DeviceBuffer<float> m_state_ref;
};

}  // namespace aisp::ch11::priorities
