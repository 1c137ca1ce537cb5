// ch10:hgemm — the contract of the GEMM ladder: C = A * B^T with bf16 inputs, fp32 accumulation and a
// bf16 output, M = N = K = size by default; the `shape` axis selects the GEMMs of a Llama MLP instead
// (shapes.hpp: gate/up, down and a decode-like M = 256).
//
// Both operands are K-major ("TN", as a Linear layer's x * W^T): A is M x K and B is N x K, row-major.
// That is the layout the Hopper tensor-core instructions (wgmma) and the TMA engine read best, and the
// one every step uses. The bound is the tensor cores' bf16 rate: 2 * M * N * K FLOPs against
// 2 * (M*K + N*K + M*N) bytes, 2731 FLOP per byte for the square GEMM at 8192, far above the ~200
// FLOP/byte at which an H200 turns compute-bound (shape 3 is the exception: shapes.hpp). The reference is
// cuBLASLt (bf16 in, fp32 compute, bf16 out), checked on the host (reference.hpp) at the test size.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"
#include "chapters/ch10_tensor_cores/hgemm/shapes.hpp"
#include "core/base/error.hpp"
#include "kernels/common/lt_gemm_tn.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch10::hgemm {

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* a;  // M x K, row-major (K contiguous)
  const __nv_bfloat16* b;  // N x K, row-major (K contiguous): C = A * B^T, both operands K-major ("TN",
                           // as a Linear layer's x * W^T) — the layout wgmma and TMA like best
  __nv_bfloat16* c;        // M x N, row-major; fp32 accumulation, rounded to bf16 once at the end
  int m, n, k;
  int sm_count;
};

class HgemmProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch10",
            .ladder = "hgemm",
            .summary = "C = A * B^T, bf16 in, fp32 accumulate, bf16 out, M = N = K = size or an LLM MLP's shapes (axis "
                       "shape); bound: bf16 tensor cores",
            .axes = {{.name = "size",
                      .default_value = 8192,
                      .help = "M = N = K at shape 0, else the hidden size (a multiple of 256; of 512 at shapes "
                              "1-3); 2 * size^3 FLOPs at shape 0",
                      .min_value = k_size_multiple,
                      .test_value = 512,
                      .default_sweep = {4096, 8192}},
                     // Added after the square results were stored: shape 0 stays out of their key.
                     {.name = "shape",
                      .default_value = 0,
                      .help = std::string("GEMM shape: ") + k_shapes_text,
                      .min_value = 0,
                      .omit_at_default = true}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const GemmShape shape = gemm_shape(axes.at("size"), axes.at("shape"));  // UsageError for what no step tiles
    m_m = shape.m;
    m_n = shape.n;
    m_k = shape.k;
    m_a = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_k);
    m_b = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_n) * m_k);
    m_c = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_c_ref = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_sm_count = device.sm_count;
    m_reference.reset();
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ULL, -1.0, 1.0, stream);
    if (!m_reference) m_reference = std::make_unique<LtGemmTn>(m_m, m_n, m_k);
    m_reference->run(m_a.data(), m_b.data(), m_c_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::bf16}, {"b", m_b.data(), m_b.size(), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"c_ref", m_c_ref.data(), m_c_ref.size(), DType::bf16}};
  }

  // Two sources of difference, both legitimate:
  // - the output is rounded to bf16 (8 significant bits) once: two fp32 sums a hair apart can round to
  //   neighbouring bf16 values, one ulp = up to 2^-7 of the value apart; rtol = 2^-7 covers that.
  // - the fp32 sums themselves differ by summation order (tensor-core tiles, split K). With inputs in
  //   [-1, 1) a dot product over K has a typical size of sqrt(K / 9) and fp32 order differences of order
  //   sqrt(K) * 2^-24 * sqrt(K / 9) = K * 2^-24 / 3: 1.6e-4 at K = 8192 (the square default), 5.7e-4 at
  //   K = 3.5 x 8192 = 28672 (shape 2), 2.3e-3 at the largest K, 3.5 x 32768. Near zero the relative term
  //   is no help, so atol = 2^-5 = 3.1e-2: 190, 55 and 13 times those, and still far below a wrong
  //   element's error, of the order of the typical size (30 at K = 8192, 56 at 28672).
  Tolerance tolerance() const override { return {0x1p-5, 0x1p-7}; }

  Work work() const override {
    const double m = m_m, n = m_n, k = m_k;
    const double read = 2.0 * (m * k + n * k), written = 2.0 * m * n;
    return {.bytes = read + written,
            .flops = 2.0 * m * n * k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "bf16"};
  }

  Args args() const override { return {m_a.data(), m_b.data(), m_c.data(), m_m, m_n, m_k, m_sm_count}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> a = to_host(inputs()[0], stream);
    const std::vector<double> b = to_host(inputs()[1], stream);
    const std::vector<double> want = gemm_tn(a, b, m_m, m_n, m_k);
    return compare_on_host("c_ref", to_host(references()[0], stream), want, tolerance());
  }

 private:
  int m_m = 0, m_n = 0, m_k = 0;
  DeviceBuffer<__nv_bfloat16> m_a, m_b, m_c, m_c_ref;
  int m_sm_count = 0;
  std::unique_ptr<LtGemmTn> m_reference;
};

}  // namespace aisp::ch10::hgemm
