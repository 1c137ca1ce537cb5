// ch12:conditional — the contract of the convergence-loop ladder: iterate x = c / (1 + x) over n elements
// from x = 0 until no element moves by more than k_rel_tol (relative) in one iteration, or max_iters
// iterations (reference.hpp). Outputs: the final x and the number of iterations done.
//
// The loop's length is data-dependent, so something must read the convergence flag after every
// iteration and decide whether to run another. The ladder moves that decision from the host (a D2H copy
// of the flag and a synchronize per iteration) to the device (a conditional WHILE node of a CUDA graph
// whose body sets its own condition). Both evaluate the same predicate after every iteration and do the
// same iterations; the iteration count is an output, so a variant that stops early or late fails the gate.
//
// Each iteration is one small kernel (n = 2^16 by default: 256 blocks, 512 KiB moved), a few µs on the
// device, so the per-iteration round trip of the host loop is most of its time, and a few hundred
// iterations make it add up.
//
// Clock: wall, because the host loop waits on the device every iteration: its synchronizations are the
// subject, and the GPU clock could not even hold its launches (they wait on their own work). Mode: hot
// (the data, 512 KiB, is not the subject). Inside the measured window: everything a variant does per
// launch, the host loop's copies and synchronizations included. Outside it: building and instantiating
// the graph (setup()).
//
// No bytes or FLOPs are declared: they scale with an iteration count known only after the run, and the
// bound is per iteration anyway (README): the host loop's round trip against the graph's per-node cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch12_graphs/conditional/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch12::conditional {

struct Args {
  const float* c;           // n values
  float* x;                 // n values: the iterate, then the answer (output)
  std::int32_t* iterations;  // one value: iterations done (output)
  unsigned* moving;         // one value: scratch, set non-zero by an iteration in which some element moved
  int n;
  int max_iters;
};

inline constexpr int k_threads = 256;

// The trusted device reference (device_reference.cu): the whole loop in one block, which decides to go on
// with __syncthreads_or: no host, no graph, nothing of what the ladder varies.
void solve_on_device(const float* c, int n, int max_iters, float* x, std::int32_t* iterations,
                     cudaStream_t stream);

class ConditionalProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch12",
            .ladder = "conditional",
            .summary = "a convergence loop: host reads the flag back every iteration vs a conditional WHILE "
                       "graph node (wall clock)",
            .axes = {{.name = "n",
                      .default_value = std::int64_t{1} << 16,
                      .help = "elements iterated (default 2^16: a few-µs kernel per iteration)",
                      .test_value = 1000},
                     {.name = "max_iters",
                      .default_value = 10000,
                      .help = "iteration cap (the default is never reached: a few hundred iterations converge)"}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& /*device*/) override {
    const std::int64_t n = axes.at("n"), max_iters = axes.at("max_iters");
    if (n > (std::int64_t{1} << 30)) throw UsageError("ch12:conditional: n must be at most 2^30");
    if (max_iters > 1000000) throw UsageError("ch12:conditional: max_iters must be at most 10^6");
    m_n = static_cast<int>(n);
    m_max_iters = static_cast<int>(max_iters);
    m_c = DeviceBuffer<float>(static_cast<std::size_t>(m_n));
    m_x = DeviceBuffer<float>(static_cast<std::size_t>(m_n));
    m_x_ref = DeviceBuffer<float>(static_cast<std::size_t>(m_n));
    m_iterations = DeviceBuffer<std::int32_t>(1);
    m_iterations_ref = DeviceBuffer<std::int32_t>(1);
    m_moving = DeviceBuffer<unsigned>(1);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs().front(), seed, k_c_lo, k_c_hi, stream);
    solve_on_device(m_c.data(), m_n, m_max_iters, m_x_ref.data(), m_iterations_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override { return {{"c", m_c.data(), count(), DType::f32}}; }
  std::vector<TensorView> outputs() const override {
    return {{"x", m_x.data(), count(), DType::f32}, {"iterations", m_iterations.data(), 1, DType::i32}};
  }
  std::vector<TensorView> references() const override {
    return {{"x_ref", m_x_ref.data(), count(), DType::f32},
            {"iterations_ref", m_iterations_ref.data(), 1, DType::i32}};
  }

  // Every variant and the reference run the same add and IEEE division in the same order and stop after
  // the same iteration, so x agrees bit for bit; rtol 1e-6 is slack for nothing legitimate. On the
  // iteration count it allows no difference at all (1e-6 of a few hundred is under 1): a variant that
  // stops one iteration early or late fails there even where x barely moved.
  Tolerance tolerance() const override { return {0.0, 1e-6}; }

  // Declared as none: see the comment at the top.
  Work work() const override { return {}; }

  Args args() const override {
    return {m_c.data(), m_x.data(), m_iterations.data(), m_moving.data(), m_n, m_max_iters};
  }

  bool has_host_reference() const override { return true; }
  // The host runs the same fp32 arithmetic (reference.hpp), so the device reference must match exactly.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto c64 = to_host(inputs().front(), stream);
    const auto want = solve_reference(std::vector<float>(c64.begin(), c64.end()), m_max_iters);
    const auto refs = references();
    const std::vector<double> want_x(want.x.begin(), want.x.end());
    std::string why = compare_on_host("x_ref", to_host(refs[0], stream), want_x, tolerance());
    if (why.empty()) {
      why = compare_on_host("iterations_ref", to_host(refs[1], stream), {static_cast<double>(want.iterations)},
                            tolerance());
    }
    return why;
  }

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_n); }

  int m_n = 0;
  int m_max_iters = 0;
  DeviceBuffer<float> m_c;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_x_ref;
  DeviceBuffer<std::int32_t> m_iterations;
  DeviceBuffer<std::int32_t> m_iterations_ref;
  DeviceBuffer<unsigned> m_moving;
};

}  // namespace aisp::ch12::conditional
