// ch01:goodput — the contract of the training-loop ladder: `steps` steps of a small training loop per
// launch, and the loss of every step.
//
// Each step is four kernels on the stream: forward (r = w x - t), the loss's block partials (sum of r^2
// in double), the loss's final sum into losses[step], and the update (w -= lr r x); reference.hpp has the
// math. A launch starts from the initial weights w0 (one device copy), so every launch computes the same
// losses. The kernels are the ladder's workload, shared by every step of the ladder (training_step.cu):
// what the steps change is only how the host gets the losses, after each step with a synchronization
// (01) or all at once at the end (02). Both hand every loss to the host and check it there.
//
// Clock: wall (hot: launch after launch, one synchronize per sample). The subject is the host
// synchronization itself, which the GPU clock cannot see: while the host waits for step s's loss and
// then issues step s+1's kernels, the GPU idles, and that idle time is what step 02 removes. Host costs
// are inside the measured window on purpose.
//
// Declared work per launch: 8 bytes per element to reset w, then per step 36 bytes per element (forward
// reads w, x, t and writes r; the loss reads r; the update reads w, r, x and writes w) and ~7 FLOPs per
// element. At the default n = 2^20 the four arrays (16 MB) stay in L2: each step is a few microseconds of
// GPU work, the regime where a per-step synchronization costs the most.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/ch01_goodput/goodput/reference.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch01::goodput {

// What every variant's launch receives. `losses` holds garbage (the gate poisons it) until the steps
// write it; w, r and partials are the loop's working state, rewritten by every launch.
struct Args {
  const float* x;   // n inputs
  const float* t;   // n targets
  const float* w0;  // n initial weights
  float* w;         // n weights, reset to w0 at the start of each launch
  float* r;         // n residuals of the current step
  double* partials;  // reduce_blocks block sums of the current step's loss
  float* losses;     // steps losses, the output
  std::size_t n;
  int steps;
  int reduce_blocks;  // grid of the loss's partial-sum kernel (<= k_max_reduce_blocks)
};

// The most blocks of the loss's partial-sum kernel: the final sum is one block of this many threads.
inline constexpr int k_max_reduce_blocks = 1024;

// The ladder's workload (training_step.cu), identical for every variant: reset w to w0, and one step's
// four kernels, the last of which writes losses[step]. Both enqueue on `stream` and return at once.
void enqueue_reset(const Args& a, cudaStream_t stream);
void enqueue_training_step(const Args& a, int step, cudaStream_t stream);

// The trusted device reference (device_reference.cu): every element's trajectory in double, each
// step's sum of r^2 accumulated in double, rounded to float once. `acc` is `steps` doubles of scratch.
void training_losses_on_device(const Args& a, double* acc, float* losses_ref, cudaStream_t stream);

class GoodputProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch01",
            .ladder = "goodput",
            .summary = "training-like loop, 4 kernels a step: loss read back with a sync every step -> once",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 20,
                      .help = "elements of the model (w, x, t, r: fp32 each)",
                      .test_value = 5003,  // odd: a partial last block in every kernel
                      .default_sweep = {std::int64_t{1} << 16, std::int64_t{1} << 20, std::int64_t{1} << 24}},
                     {.name = "steps", .default_value = 100, .help = "training steps per launch", .test_value = 7}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const auto n = static_cast<std::size_t>(axes.at("n"));
    const int steps = static_cast<int>(axes.at("steps"));
    m_x = DeviceBuffer<float>(n);
    m_t = DeviceBuffer<float>(n);
    m_w0 = DeviceBuffer<float>(n);
    m_w = DeviceBuffer<float>(n);
    m_r = DeviceBuffer<float>(n);
    const std::size_t blocks = (n + k_reduce_threads - 1) / k_reduce_threads;
    const int reduce_blocks = static_cast<int>(blocks < k_max_reduce_blocks ? blocks : k_max_reduce_blocks);
    m_partials = DeviceBuffer<double>(static_cast<std::size_t>(reduce_blocks));
    m_losses = DeviceBuffer<float>(static_cast<std::size_t>(steps));
    m_losses_ref = DeviceBuffer<float>(static_cast<std::size_t>(steps));
    m_acc = DeviceBuffer<double>(static_cast<std::size_t>(steps));
    m_args = {m_x.data(), m_t.data(), m_w0.data(), m_w.data(), m_r.data(), m_partials.data(),
              m_losses.data(), n, steps, reduce_blocks};
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -1.0, 1.0, stream);
    fill_uniform(in[1], seed ^ 0x9e3779b97f4a7c15ull, -1.0, 1.0, stream);
    fill_uniform(in[2], seed ^ 0xc2b2ae3d27d4eb4full, -1.0, 1.0, stream);
    training_losses_on_device(m_args, m_acc.data(), m_losses_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), m_args.n, DType::f32},
            {"t", m_t.data(), m_args.n, DType::f32},
            {"w0", m_w0.data(), m_args.n, DType::f32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"losses", m_losses.data(), m_losses.size(), DType::f32}};
  }
  std::vector<TensorView> references() const override {
    return {{"losses_ref", m_losses_ref.data(), m_losses_ref.size(), DType::f32}};
  }

  // The fp32 trajectory against the double one: rtol = 64 steps u (reference.hpp, loss_rtol), ~4e-4 at
  // 100 steps. No atol: every loss is a mean of squares of residuals of size ~0.5, far from 0.
  Tolerance tolerance() const override { return {0.0, loss_rtol(m_args.steps)}; }

  Work work() const override {
    const double n = static_cast<double>(m_args.n), steps = m_args.steps;
    const double read = n * (4 + steps * 28), written = n * (4 + steps * 8) + 4 * steps;
    return {.bytes = read + written,
            .flops = 7 * n * steps,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override { return m_args; }

  bool has_host_reference() const override { return true; }
  // The device's double losses and the host's differ in summation order only (~1e-16 relative): after
  // rounding to float they agree to an ulp.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = inputs();
    const auto want = training_losses_reference(to_host(in[0], stream), to_host(in[1], stream),
                                                to_host(in[2], stream), m_args.steps);
    std::vector<double> rounded(want.size());
    for (std::size_t i = 0; i < want.size(); ++i) rounded[i] = static_cast<float>(want[i]);
    return compare_on_host("losses_ref", to_host(references().front(), stream), rounded, {0.0, 1.0 / 4194304.0});
  }

 private:
  static constexpr int k_reduce_threads = 256;  // training_step.cu's block size
  Args m_args{};
  DeviceBuffer<float> m_x, m_t, m_w0, m_w, m_r, m_losses, m_losses_ref;
  DeviceBuffer<double> m_partials, m_acc;
};

// What the host does with a loss it has read back: a training loop logs it and stops on divergence.
// Throws DataError for a loss that is not finite (never the case for this problem's inputs).
void check_loss(float loss, int step);

}  // namespace aisp::ch01::goodput
