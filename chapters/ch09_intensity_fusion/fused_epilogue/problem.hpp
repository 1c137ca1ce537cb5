// ch09:fused_epilogue — the contract of the fusion ladder: C = gelu(A B + bias), row-major A (m x k),
// B (k x n), bias (n, one value per column of C), GELU in its tanh form (reference.hpp).
//
// The lesson: an elementwise epilogue run as its own kernel costs one more write and read of C through
// DRAM (2 m n 4 bytes, 134 MB at 4096^2) and a launch; applied to the accumulators while they are still in
// registers it costs a few instructions per output. The bound is the GEMM's: 2 m n k FLOPs at the FP32 FMA
// rate. Same default shape as ch09:sgemm (4096^3), so the two targets compare directly (README).
//
// Sizes: as ch09:sgemm (m, n multiples of 128, k of 32), for the same GEMM kernels.
// Reference: cuBLASLt FP32 GEMM, then a separate bias + GELU kernel; checked against a double precision
// host reference at the test sizes.
#pragma once

#include <string>

#include "chapters/ch09_intensity_fusion/common/lt_sgemm.hpp"
#include "chapters/ch09_intensity_fusion/fused_epilogue/bias_gelu.cuh"
#include "chapters/ch09_intensity_fusion/fused_epilogue/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch09::fused_epilogue {

struct Args {
  const float* a;     // m x k, row-major
  const float* b;     // k x n, row-major
  const float* bias;  // n
  float* c;           // m x n, row-major
  int m, n, k;
  int sm_count;       // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
  int cc;             // compute capability, major * 10 + minor: picks the GEMM's tuned tiles
};

class FusedEpilogueProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch09",
            .ladder = "fused_epilogue",
            .summary = "C = gelu(A B + bias) in FP32, epilogue fused or not; bound: FP32 FMA rate",
            .axes = {{.name = "m", .default_value = 4096, .help = "rows of A and C (multiple of 128)",
                      .test_value = 384},
                     {.name = "n", .default_value = 4096,
                      .help = "columns of B and C, length of bias (multiple of 128)", .test_value = 256},
                     {.name = "k", .default_value = 4096, .help = "reduction length (multiple of 32)",
                      .test_value = 160}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_m = static_cast<int>(axes.at("m"));
    m_n = static_cast<int>(axes.at("n"));
    m_k = static_cast<int>(axes.at("k"));
    if (m_m % 128 != 0 || m_n % 128 != 0 || m_k % 32 != 0) {
      // (std::to_string, not fmt: nvcc's front end rejects fmt's consteval format strings.)
      throw UsageError("ch09:fused_epilogue needs m and n multiples of 128 and k a multiple of 32 (the "
                       "GEMM's tiles); got m=" + std::to_string(m_m) + " n=" + std::to_string(m_n) +
                       " k=" + std::to_string(m_k));
    }
    m_a = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_k);
    m_b = DeviceBuffer<float>(static_cast<std::size_t>(m_k) * m_n);
    m_bias = DeviceBuffer<float>(static_cast<std::size_t>(m_n));
    m_c = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
    m_ref = DeviceBuffer<float>(static_cast<std::size_t>(m_m) * m_n);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
    m_cc = device.cc();
    m_reference.plan(m_m, m_n, m_k);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto ins = inputs();
    fill_uniform(ins[0], seed, -1.0, 1.0, stream);
    fill_uniform(ins[1], seed + 1, -1.0, 1.0, stream);
    fill_uniform(ins[2], seed + 2, -1.0, 1.0, stream);
    m_reference.run(m_a.data(), m_b.data(), m_ref.data(), stream);
    launch_bias_gelu(m_ref.data(), m_bias.data(), m_m, m_n, m_sm_count, m_max_threads_per_sm, stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::f32},
            {"b", m_b.data(), m_b.size(), DType::f32},
            {"bias", m_bias.data(), m_bias.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::f32}}; }
  std::vector<TensorView> references() const override {
    return {{"c_cublaslt_gelu", m_ref.data(), m_ref.size(), DType::f32}};
  }

  // The GEMM's tolerance (ch09:sgemm: atol = k * 2^-20 for the FP32 summation order; GELU's slope is at
  // most 1.13, so it carries that error over almost unchanged) plus rtol 1e-5 for the epilogue: tanhf and
  // cuBLASLt's own GELU differ from the double reference by a few ulp of the output.
  Tolerance tolerance() const override { return {sgemm::gemm_atol(m_k), 1e-5}; }

  // Minimum traffic: A, B and bias read once, C written once. FLOPs: the GEMM's 2 m n k; the epilogue's
  // ~20 operations per output (0.5% of 2 k at k = 4096) are left out, as is usual for GEMM + epilogue.
  Work work() const override {
    const double read =
        4.0 * (static_cast<double>(m_m) * m_k + static_cast<double>(m_k) * m_n + static_cast<double>(m_n));
    const double written = 4.0 * static_cast<double>(m_m) * m_n;
    return {.bytes = read + written,
            .flops = 2.0 * m_m * static_cast<double>(m_n) * m_k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_a.data(), m_b.data(), m_bias.data(), m_c.data(), m_m, m_n, m_k,
            m_sm_count, m_max_threads_per_sm, m_cc};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto ins = inputs();
    const auto want = reference_fused(to_host(ins[0], stream), to_host(ins[1], stream),
                                      to_host(ins[2], stream), m_m, m_n, m_k);
    return compare_on_host("c_cublaslt_gelu", to_host(references()[0], stream), want, tolerance());
  }

 private:
  int m_m = 0, m_n = 0, m_k = 0;
  DeviceBuffer<float> m_a, m_b, m_bias, m_c, m_ref;
  int m_sm_count = 0, m_max_threads_per_sm = 0, m_cc = 0;
  LtSgemm m_reference;
};

}  // namespace aisp::ch09::fused_epilogue
