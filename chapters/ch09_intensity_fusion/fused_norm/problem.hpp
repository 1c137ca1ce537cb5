// ch09:fused_norm — the contract of the fusion ladder: the residual add and RMS norm that open every
// Llama block, per row of a tokens x hidden bf16 matrix:
//   h = x + residual                            (written: the residual stream the next layer reads)
//   y = h / sqrt(mean(h^2) + eps) * weight      (written: the input of the attention or MLP)
// in fp32 arithmetic on bf16 data. h is rounded to bf16 when it is written, and the norm reads the
// rounded h: that is what an unfused model computes (it stores h, then normalizes what it stored) and
// what vLLM's fused_add_rms_norm computes. x and residual are inputs and stay unchanged (the gate hashes
// them), so h goes to its own buffer instead of overwriting residual in place.
//
// The lesson is fusion: three kernels (add, row statistics, scale), each a round trip through DRAM,
// against one kernel that reads each row once and writes it once.
// Bound: the DRAM copy ceiling. Minimum traffic: x and residual read once, h and y written once, weight
// read once: 8 * tokens * hidden + 2 * hidden bytes; 2.15 GB at 32768 x 8192.
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "chapters/ch09_intensity_fusion/fused_norm/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch09::fused_norm {

// Llama's value.
constexpr float k_eps = 1e-6f;

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* x;         // tokens x hidden, row-major: the sublayer's output
  const __nv_bfloat16* residual;  // tokens x hidden, row-major: the residual stream so far
  const __nv_bfloat16* weight;    // hidden
  __nv_bfloat16* h;               // tokens x hidden: x + residual, the new residual stream
  __nv_bfloat16* y;               // tokens x hidden: the normalized h
  int tokens;
  int hidden;                     // a multiple of 8: every row starts on a 16-byte boundary (allocate)
};

// The trusted path (problem.cu): one block per row, fp64 arithmetic, one rounding of each output.
void launch_reference(const Args& a, __nv_bfloat16* h_ref, __nv_bfloat16* y_ref, cudaStream_t stream);

class FusedNormProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch09",
            .ladder = "fused_norm",
            .summary = "h = x + residual, y = rmsnorm(h) * w on bf16 rows (fp32 math); bound: DRAM copy",
            .axes = {{.name = "tokens", .default_value = 32768, .help = "rows (tokens of the batch)",
                      // Odd, so that no grid divides it evenly.
                      .test_value = 37},
                     {.name = "hidden", .default_value = 8192,
                      .help = "bf16 elements per row (model width); a multiple of 8", .min_value = 8,
                      // 125 16-byte vectors: not a multiple of any block size, so the tails run.
                      .test_value = 1000,
                      // Llama-3 8B and 70B widths.
                      .default_sweep = {4096, 8192}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_tokens = static_cast<int>(axes.at("tokens"));
    m_hidden = static_cast<int>(axes.at("hidden"));
    // Rows of a multiple of 8 bf16 start on 16-byte boundaries, which the 16-byte vectors of every step
    // need; model widths are multiples of 64 anyway. Enforced here, once, for every step.
    if (m_hidden % 8 != 0) {
      throw UsageError("ch09:fused_norm: hidden must be a multiple of 8 (16-byte rows), got " +
                       std::to_string(m_hidden));
    }
    m_x = DeviceBuffer<__nv_bfloat16>(count());
    m_residual = DeviceBuffer<__nv_bfloat16>(count());
    m_weight = DeviceBuffer<__nv_bfloat16>(m_hidden);
    m_h = DeviceBuffer<__nv_bfloat16>(count());
    m_y = DeviceBuffer<__nv_bfloat16>(count());
    m_h_ref = DeviceBuffer<__nv_bfloat16>(count());
    m_y_ref = DeviceBuffer<__nv_bfloat16>(count());
  }

  // x (a sublayer's output) in [-1, 1), the residual stream in [-3, 3), weight around 1: each from its
  // own seed so that they are not correlated.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto in = inputs();
    fill_uniform(in[0], seed, -1.0, 1.0, stream);
    fill_uniform(in[1], seed * 3 + 1, -3.0, 3.0, stream);
    fill_uniform(in[2], seed * 5 + 2, 0.5, 1.5, stream);
    launch_reference(args(), m_h_ref.data(), m_y_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"x", m_x.data(), count(), DType::bf16},
            {"residual", m_residual.data(), count(), DType::bf16},
            {"weight", m_weight.data(), static_cast<std::size_t>(m_hidden), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"h", m_h.data(), count(), DType::bf16}, {"y", m_y.data(), count(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"h_ref", m_h_ref.data(), count(), DType::bf16}, {"y_ref", m_y_ref.data(), count(), DType::bf16}};
  }

  // One bf16 ulp (at most 2^-7 of the value: 8 significant bits) for both outputs.
  // h: the fp32 sum of two bf16 values is exact whenever their exponents differ by at most 15 (8 + 15 + 1
  // bits fit in fp32's 24), and otherwise the smaller is under 2^-15 of the larger, far from moving the
  // bf16 rounding; so a variant's bf16(fp32 sum) equals the reference's bf16(exact sum) bit for bit. The
  // ulp is only a margin.
  // y: the reference rounds the exact result once; a variant's fp32 statistics differ from it by ~1e-6
  // relative (a sum of positive squares: no cancellation), so near a rounding boundary the two land on
  // neighbouring bf16 values, one ulp apart. atol only covers the smallest outputs.
  Tolerance tolerance() const override { return {1e-6, 0x1.0p-7}; }

  // Minimum DRAM traffic: x and residual read once, h and y written once, weight read once (2 bytes
  // each). FLOPs (fp32, per element): the add (1), the square-and-add (2), the multiplies by rstd and by
  // w (2).
  Work work() const override {
    const double plane = 2.0 * static_cast<double>(count());
    const double w = 2.0 * m_hidden;
    return {.bytes = 4.0 * plane + w, .flops = 5.0 * static_cast<double>(count()),
            .bytes_read = 2.0 * plane + w, .bytes_written = 2.0 * plane, .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_x.data(), m_residual.data(), m_weight.data(), m_h.data(), m_y.data(), m_tokens, m_hidden};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  std::size_t count() const { return static_cast<std::size_t>(m_tokens) * m_hidden; }

  int m_tokens = 0;
  int m_hidden = 0;
  DeviceBuffer<__nv_bfloat16> m_x;
  DeviceBuffer<__nv_bfloat16> m_residual;
  DeviceBuffer<__nv_bfloat16> m_weight;
  DeviceBuffer<__nv_bfloat16> m_h;
  DeviceBuffer<__nv_bfloat16> m_y;
  DeviceBuffer<__nv_bfloat16> m_h_ref;
  DeviceBuffer<__nv_bfloat16> m_y_ref;
};

}  // namespace aisp::ch09::fused_norm
