// ch01:launch_batching — the contract of the batched GEMM ladder: C_i = A_i B for `batch` small products.
//
// A_i (m x k) and B (k x n) are bf16, C_i (m x n) fp32, all row-major and stacked (A_i right after
// A_{i-1}), one B shared by every product: the shape of many per-item projections through one weight
// (per-sample or per-head matmuls). Every step computes it with cuBLAS (fp32 compute); what changes is
// how many calls and kernels it takes: one per product (01), one batched call (02), one GEMM of the
// stacked (batch * m) x k matrix (03; reference.hpp says exactly when that is legal).
//
// Clock: wall, hot. The subject is the cost of issuing many small launches. The GPU clock with the
// harness's blocking kernel would hold the GPU while the host issues all `batch` calls and then time
// only the back-to-back kernels: it keeps out the host cost of each cuBLAS call (its argument checks,
// heuristic lookup and launch, a few microseconds), which is half of what batching removes. The wall
// clock in hot mode times launch after launch with one synchronize per sample: the time per launch is
// what a loop issuing this batch again and again sees, max(host issue time, GPU time) per batch. Host
// costs are inside the measured window on purpose: they are the lesson.
//
// Declared work: the bytes of A, B and C once and 2 batch m n k FLOPs (bf16 inputs, fp32 accumulate).
// At the defaults (512 products of 64 x 64 x 64) that is 12.6 MB and 0.27 GFLOP: microseconds of a
// Hopper GPU, so the launches, not the math, are what the steps spend.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <limits>
#include <string>

#include "chapters/ch01_goodput/launch_batching/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch01::launch_batching {

// What every variant's launch receives. `c` holds garbage (the gate poisons it) until the variant
// writes it; every step overwrites all of it (beta = 0).
struct Args {
  const __nv_bfloat16* a;  // batch x m x k
  const __nv_bfloat16* b;  // k x n, shared
  float* c;                // batch x m x n
  int batch, m, n, k;
};

// The trusted device reference (device_reference.cu): each element's dot product accumulated in double,
// rounded to float.
void batched_gemm_on_device(const Args& a, float* c_ref, cudaStream_t stream);

class LaunchBatchingProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch01",
            .ladder = "launch_batching",
            .summary = "small GEMMs C_i = A_i B (bf16 in, fp32 out), cuBLAS: per-item calls -> batched -> one GEMM",
            .axes = {{.name = "batch", .default_value = 512, .help = "number of products C_i = A_i B",
                      .test_value = 5, .default_sweep = {64, 512, 4096}},
                     {.name = "m", .default_value = 64, .help = "rows of each A_i and C_i", .test_value = 33},
                     {.name = "n", .default_value = 64, .help = "columns of B and of each C_i", .test_value = 40},
                     {.name = "k", .default_value = 64, .help = "columns of A_i = rows of B", .test_value = 24}},
            .clock = ClockKind::wall,
            .default_mode = CacheMode::hot,
            // Step 01 at 4096 products is the host's rate of issuing cuBLAS calls, which drifts: +-6% after
            // 3 s on one H200 host, +-0.7% after 10 s on another (README).
            .sampling_budget_s = 10};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    const std::int64_t batch = axes.at("batch"), m = axes.at("m"), n = axes.at("n"), k = axes.at("k");
    // cuBLAS takes int dimensions: the stacked (batch * m) rows of step 03 must fit one.
    constexpr std::int64_t int_max = std::numeric_limits<int>::max();
    if (batch * m > int_max || m > int_max || n > int_max || k > int_max) {
      throw UsageError("ch01:launch_batching: batch * m, n and k must each fit a 32-bit int (cuBLAS dimensions)");
    }
    m_args = {nullptr, nullptr, nullptr, static_cast<int>(batch), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k)};
    m_a = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(batch * m * k));
    m_b = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(k * n));
    m_c = DeviceBuffer<float>(static_cast<std::size_t>(batch * m * n));
    m_c_ref = DeviceBuffer<float>(m_c.size());
    m_args.a = m_a.data();
    m_args.b = m_b.data();
    m_args.c = m_c.data();
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -k_amax, k_amax, stream);
    fill_uniform(in[1], seed ^ 0x9e3779b97f4a7c15ull, -k_amax, k_amax, stream);
    batched_gemm_on_device(m_args, m_c_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::bf16}, {"b", m_b.data(), m_b.size(), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"c_ref", m_c_ref.data(), m_c_ref.size(), DType::f32}};
  }

  // atol: the worst-case fp32 accumulation error of a k-term dot product with a factor 4 for tensor-core
  // truncation and margin (reference.hpp, element_atol): ~1e-3 at k = 64. rtol: twice fp32's rounding
  // of the result, which the reference (double, rounded once) and cuBLAS (fp32 out) both do.
  Tolerance tolerance() const override {
    return {element_atol(m_args.k, k_amax), 2.0 * k_fp32_unit_roundoff};
  }

  Work work() const override {
    const double batch = m_args.batch, m = m_args.m, n = m_args.n, k = m_args.k;
    const double read = 2.0 * (batch * m * k + k * n), written = 4.0 * batch * m * n;
    return {.bytes = read + written,
            .flops = 2.0 * batch * m * n * k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "bf16"};
  }

  Args args() const override { return m_args; }

  bool has_host_reference() const override { return true; }
  // The device's double dot products and the host's differ only in summation order, ~1e-16 relative:
  // after rounding to float they agree to one float ulp (or to 1e-12 near zero).
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto in = inputs();
    const auto want = batched_gemm_reference(to_host(in[0], stream), to_host(in[1], stream), m_args.batch,
                                             m_args.m, m_args.n, m_args.k);
    std::vector<double> rounded(want.size());
    for (std::size_t i = 0; i < want.size(); ++i) rounded[i] = static_cast<float>(want[i]);
    return compare_on_host("c_ref", to_host(references().front(), stream), rounded, {1e-12, 1.0 / 8388608.0});
  }

 private:
  static constexpr double k_amax = 1.0;  // inputs uniform in [-1, 1)
  Args m_args{};
  DeviceBuffer<__nv_bfloat16> m_a, m_b;
  DeviceBuffer<float> m_c, m_c_ref;
};

}  // namespace aisp::ch01::launch_batching
