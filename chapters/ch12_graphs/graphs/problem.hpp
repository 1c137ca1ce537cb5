// ch12:graphs — the contract of the graph ladder: a chain of K small dependent kernels over a small buffer,
// out = step_{K-1}(... step_0(x) ...), step_k(v) = fma(scale[k], v, shift[k]) elementwise.
//
// This is the shape of a decode step or an optimizer's tail: many kernels that each do microseconds of
// work, one after another. Every kernel moves 8 n bytes (64 KiB at the default n = 2^14), under a
// microsecond at L2 speed, so the device is idle most of the time and the cost is launching: the host
// time of K cudaLaunchKernel calls, and the device's per-kernel overhead between dependent kernels. The
// ladder removes the host side of it: one graph launch instead of K kernel launches, then the cost of
// keeping the graph right when the caller's pointers change.
//
// Clock: wall (docs/measurement.md "Two clocks"). The subject is host launch cost, which the GPU clock
// hides on purpose (it queues the launches behind a blocking kernel); the wall clock around launch +
// synchronize measures what a program waits for, host and device together. Mode: hot, because the data
// is not the subject: the whole working set (four n-value buffers, 256 KiB) lives in L2 either way.
//
// What is inside the measured window: every host call a variant makes per launch (cudaLaunchKernel,
// cudaGraphExecKernelNodeSetParams, cudaGraphLaunch), because those costs are the lesson. Capturing and
// instantiating a graph happen once in setup(), outside it, as a program would do them once at start-up.
//
// Why the per-step coefficients are device arrays rather than by-value scalars: a captured graph bakes
// its kernels' arguments in. Everything that changes with the seed (x, scale, shift) lives in device
// memory at addresses fixed for the problem's life, so a graph captured once stays right for every seed
// (the "static buffers" rule of CUDA graphs). Only the caller's pointers x and out sit on the chain's
// boundary; step 03 shows what it costs to honor them if they move.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chapters/ch12_graphs/graphs/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch12::graphs {

struct Args {
  const float* x;      // the chain's input, n values
  const float* scale;  // K values: step k multiplies by scale[k]
  const float* shift;  // K values: and adds shift[k]
  float* out;          // n values, written by the last step
  float* ws0;          // two n-value workspaces the steps in between ping-pong through (the activations
  float* ws1;          // of a network's layers); owned by the problem, so every variant uses the same
  int n;
  int kernels;  // K
};

// Which buffer step k reads and writes: step 0 reads x, step K-1 writes out, the ones in between
// alternate between the workspaces. Part of the contract so that every variant runs the same chain.
inline const float* step_src(const Args& a, int k) { return k == 0 ? a.x : (k % 2 == 1 ? a.ws0 : a.ws1); }
inline float* step_dst(const Args& a, int k) {
  return k == a.kernels - 1 ? a.out : (k % 2 == 0 ? a.ws0 : a.ws1);
}

// Threads per block of every step's kernel (and of the device reference).
inline constexpr int k_threads = 256;

// The trusted device reference (device_reference.cu): one kernel in which each thread applies all K steps
// to its element in the same order, with the same fmaf, so its result is bitwise the chain's.
void chain_on_device(const float* x, const float* scale, const float* shift, int n, int kernels, float* out,
                     cudaStream_t stream);

class GraphsProblem final : public Problem<Args> {
 public:
  // A sanity bound, not a hardware limit: past it one step is whole milliseconds of launches, and the
  // lesson is already visible at a few dozen kernels.
  static constexpr std::int64_t k_max_kernels = 4096;

  static TargetInfo target_info() {
    return {.chapter = "ch12",
            .ladder = "graphs",
            .summary = "a chain of K tiny dependent kernels: eager launches vs a CUDA graph; bound: K graph-node "
                       "launches (wall clock)",
            .axes = {{.name = "n",
                      .default_value = std::int64_t{1} << 14,
                      .help = "fp32 values each kernel transforms (default 2^14: 64 blocks, a tiny kernel)",
                      // Not a multiple of the block: the bounds check of the last block is exercised.
                      .test_value = 3000},
                     {.name = "kernels",
                      .default_value = 128,
                      .help = "K, dependent kernels in the chain (at most 4096)",
                      // Odd: the last step reads ws1; with the default's even K it reads ws0.
                      .test_value = 17}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& /*device*/) override {
    const std::int64_t n = axes.at("n");
    const std::int64_t kernels = axes.at("kernels");
    if (n > (std::int64_t{1} << 30)) {
      throw UsageError("ch12:graphs: n must be at most 2^30, got " + std::to_string(n));
    }
    if (kernels > k_max_kernels) {
      throw UsageError("ch12:graphs: kernels must be at most " + std::to_string(k_max_kernels) + ", got " +
                       std::to_string(kernels));
    }
    m_n = static_cast<int>(n);
    m_kernels = static_cast<int>(kernels);
    const auto count = static_cast<std::size_t>(m_n);
    m_x = DeviceBuffer<float>(count);
    m_out = DeviceBuffer<float>(count);
    m_ref = DeviceBuffer<float>(count);
    m_ws0 = DeviceBuffer<float>(count);
    m_ws1 = DeviceBuffer<float>(count);
    m_scale = DeviceBuffer<float>(static_cast<std::size_t>(m_kernels));
    m_shift = DeviceBuffer<float>(static_cast<std::size_t>(m_kernels));
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -1.0, 1.0, stream);
    // Distinct streams of the counter-based generator, so that scale and shift are not x's first values.
    fill_uniform(in[1], seed ^ 0x5ca1e5ca1e5ca1e5ULL, k_scale_lo, k_scale_hi, stream);
    fill_uniform(in[2], seed ^ 0x5b1f75b1f75b1f7ULL, k_shift_lo, k_shift_hi, stream);
    chain_on_device(m_x.data(), m_scale.data(), m_shift.data(), m_n, m_kernels, m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    const auto k = static_cast<std::size_t>(m_kernels);
    return {{"x", m_x.data(), static_cast<std::size_t>(m_n), DType::f32},
            {"scale", m_scale.data(), k, DType::f32},
            {"shift", m_shift.data(), k, DType::f32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"out", m_out.data(), static_cast<std::size_t>(m_n), DType::f32}};
  }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), static_cast<std::size_t>(m_n), DType::f32}};
  }

  // Every variant runs the same fmaf in the same order as the reference, so the results agree bit for bit.
  // rtol 1e-6 (~8 fp32 ulps) is slack for nothing legitimate and far below what a wrong chain produces:
  // a skipped or repeated step moves each value by a shift (~1e-2) or a scale (~2%).
  Tolerance tolerance() const override { return {0.0, 1e-6}; }

  // Per launch, K kernels each read n values and two coefficients and write n values, one fma per value.
  // All of it sits in L2 (the mode is hot), so the GB/s the report derives is far under any bandwidth
  // ceiling by design: the bound of this ladder is K graph-node launches (README).
  Work work() const override {
    const double k = m_kernels, n = m_n;
    const double read = k * (4.0 * n + 8.0), written = k * 4.0 * n;
    return {.bytes = read + written,
            .flops = 2.0 * n * k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_scale.data(), m_shift.data(), m_out.data(), m_ws0.data(), m_ws1.data(), m_n, m_kernels};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = inputs();
    const auto x = as_floats(to_host(in[0], stream));
    const auto scale = as_floats(to_host(in[1], stream));
    const auto shift = as_floats(to_host(in[2], stream));
    const auto want = chain_reference(x, scale, shift);
    return compare_on_host("out_ref", to_host(references().front(), stream),
                           std::vector<double>(want.begin(), want.end()), tolerance());
  }

 private:
  static std::vector<float> as_floats(const std::vector<double>& v) {
    return std::vector<float>(v.begin(), v.end());
  }

  int m_n = 0;
  int m_kernels = 0;
  DeviceBuffer<float> m_x;
  DeviceBuffer<float> m_scale;
  DeviceBuffer<float> m_shift;
  DeviceBuffer<float> m_out;
  DeviceBuffer<float> m_ref;
  DeviceBuffer<float> m_ws0;
  DeviceBuffer<float> m_ws1;
};

}  // namespace aisp::ch12::graphs
