// ch10:hgemm — the contract of the GEMM ladder: C = A * B^T with bf16 inputs, fp32 accumulation and a
// bf16 output, M = N = K = size.
//
// Both operands are K-major ("TN", as a Linear layer's x * W^T): A is M x K and B is N x K, row-major.
// That is the layout the Hopper tensor-core instructions (wgmma) and the TMA engine read best, and the
// one every step uses. The bound is the tensor cores' bf16 rate: 2 * size^3 FLOPs against
// 2 * (M*K + N*K + M*N) bytes, 2731 FLOP per byte at 8192, far above the ~200 FLOP/byte at which an
// H200 turns compute-bound. The reference is cuBLASLt (bf16 in, fp32 compute, bf16 out), checked on the
// host (reference.hpp) at the test size.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"
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

// Every step may tile by 256 in M, N and K without tails: the ladder is about the main loop.
constexpr int k_size_multiple = 256;

class HgemmProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch10",
            .ladder = "hgemm",
            .summary = "C = A * B^T, bf16 in, fp32 accumulate, bf16 out, M = N = K = size; bound: bf16 tensor cores",
            .axes = {{.name = "size",
                      .default_value = 8192,
                      .help = "M = N = K (a multiple of 256); 2 * size^3 FLOPs",
                      .min_value = k_size_multiple,
                      .test_value = 512,
                      .default_sweep = {4096, 8192}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t size = axes.at("size");
    if (size % k_size_multiple != 0 || size > 32768) {
      throw UsageError("ch10:hgemm: size must be a multiple of " + std::to_string(k_size_multiple) +
                       " up to 32768 (every step tiles without tails), got " + std::to_string(size));
    }
    m_m = m_n = m_k = static_cast<int>(size);
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
  //   [-1, 1) a dot product over K = 8192 has a typical size of sqrt(K / 9) ~ 30 and fp32 order
  //   differences of order sqrt(K) * 2^-24 * 30 ~ 2e-4; near zero the relative term is no help, so
  //   atol = 2^-5 (a hundred times that, and still far below a wrong element's error of order 30).
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
