// ch09:sgemm — the contract of the FP32 GEMM ladder: C = A B, row-major A (m x k), B (k x n), C (m x n).
//
// The classic ladder from a naive kernel to a warp-tiled, double-buffered one on the CUDA cores (no tensor
// cores: those are ch10). Its bound is the FP32 FMA rate: 2 m n k FLOPs, 68.7 TFLOP at m = n = k = 4096,
// against only (m k + k n + m n) * 4 bytes = 201 MB that must cross DRAM: an arithmetic intensity of
// ~680 FLOP/byte, far right of the ridge point (ch09:intensity measures where that lies).
//
// Sizes: m and n must be multiples of 128 and k a multiple of 32, the largest tiles of any step; other
// sizes are rejected at allocate() with the reason, so no step needs tail code that would blur the lesson.
//
// Reference: cuBLASLt FP32 (CUBLAS_COMPUTE_32F, no TF32) at full size, itself checked against a double
// precision host GEMM at the test sizes (check_reference_on_host).
#pragma once

#include <string>

#include "chapters/ch09_intensity_fusion/common/lt_sgemm.hpp"
#include "chapters/ch09_intensity_fusion/sgemm/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch09::sgemm {

// What every variant's launch receives.
struct Args {
  const float* a;  // m x k, row-major
  const float* b;  // k x n, row-major
  float* c;        // m x n, row-major
  int m, n, k;
  int sm_count;    // from the device: launch geometry never hard-codes a GPU
  int cc;          // compute capability, major * 10 + minor: picks 09_tuned_tiles' tiles
};

// The size rules every step relies on (see the header comment).
constexpr int k_mn_multiple = 128;
constexpr int k_k_multiple = 32;

class SgemmProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch09",
            .ladder = "sgemm",
            .summary = "FP32 GEMM C = A B (row-major, CUDA cores); bound: FP32 FMA rate",
            // Test sizes: all different, so that a mix-up of m, n and k fails; each the smallest
            // multiple the steps accept times a few, so the GPU test stays fast.
            .axes = {{.name = "m", .default_value = 4096, .help = "rows of A and C (multiple of 128)",
                      .test_value = 384},
                     {.name = "n", .default_value = 4096, .help = "columns of B and C (multiple of 128)",
                      .test_value = 256},
                     {.name = "k", .default_value = 4096,
                      .help = "columns of A, rows of B: the reduction length (multiple of 32)",
                      .test_value = 160}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_m = static_cast<int>(axes.at("m"));
    m_n = static_cast<int>(axes.at("n"));
    m_k = static_cast<int>(axes.at("k"));
    if (m_m % k_mn_multiple != 0 || m_n % k_mn_multiple != 0 || m_k % k_k_multiple != 0) {
      // (std::to_string, not fmt: nvcc's front end rejects fmt's consteval format strings.)
      throw UsageError("ch09:sgemm needs m and n multiples of " + std::to_string(k_mn_multiple) +
                       " and k a multiple of " + std::to_string(k_k_multiple) +
                       " (the largest tiles of its steps); got m=" + std::to_string(m_m) +
                       " n=" + std::to_string(m_n) + " k=" + std::to_string(m_k));
    }
    m_a = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_k);
    m_b = DeviceBuffer<float>(static_cast<std::size_t>(m_k) * m_n);
    m_c = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
    m_ref = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
    m_sm_count = device.sm_count;
    m_cc = device.cc();
    m_reference.plan(m_m, m_n, m_k);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed + 1, -1.0, 1.0, stream);
    m_reference.run(m_a.data(), m_b.data(), m_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::f32}, {"b", m_b.data(), m_b.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"c_cublaslt", m_ref.data(), m_ref.size(), DType::f32}};
  }

  // FP32 with a different summation order per kernel: each output sums k products of values in [-1, 1),
  // |sum| ~ sqrt(k)/3, rounding error per step ~ 2^-24 |partial sum|, so two orders differ by ~1e-5 at
  // k = 4096 and rarely by 1e-4. atol = k * 2^-20 (3.9e-3 at k = 4096) leaves a wide margin for that, and
  // still fails TF32 (10-bit mantissa products: errors ~1e-2 at k = 4096) and any skipped k-tile.
  Tolerance tolerance() const override { return {gemm_atol(m_k), 0.0}; }

  // Minimum traffic: A and B read once, C written once (the tiles re-read them through L2, not DRAM).
  Work work() const override {
    const double read = 4.0 * (static_cast<double>(m_m) * m_k + static_cast<double>(m_k) * m_n);
    const double written = 4.0 * static_cast<double>(m_m) * m_n;
    return {.bytes = read + written,
            .flops = 2.0 * m_m * static_cast<double>(m_n) * m_k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_a.data(), m_b.data(), m_c.data(), m_m, m_n, m_k, m_sm_count, m_cc};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto ins = inputs();
    const auto want = reference_gemm(to_host(ins[0], stream), to_host(ins[1], stream), m_m, m_n, m_k);
    return compare_on_host("c_cublaslt", to_host(references()[0], stream), want, tolerance());
  }

 private:
  int m_m = 0, m_n = 0, m_k = 0;
  DeviceBuffer<float> m_a, m_b, m_c, m_ref;
  int m_sm_count = 0, m_cc = 0;
  LtSgemm m_reference;
};

}  // namespace aisp::ch09::sgemm
