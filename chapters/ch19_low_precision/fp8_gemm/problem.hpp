// ch19:fp8_gemm — the contract of the FP8 GEMM ladder: C = (A * B^T) with A and B stored as FP8 e4m3
// plus fp32 scales, fp32 accumulation, a bf16 output; M = N = K = size.
//
// Both operands are K-major ("TN", as a Linear layer's x * W^T), the only layout Hopper's FP8 wgmma
// reads (PTX ISA "wgmma.mma_async": for .e4m3/.e5m2 both matrices must be K-major). The `scale_block`
// axis picks the scaling:
//   0    per-tensor: one fp32 scale for A, one for B (amax / 448); C = sa * sb * sum_k qa * qb.
//   128  DeepSeek-V3-style block scaling: A (activations) has one scale per row and 128-wide K block
//        (1 x 128), B (weights) one per 128 x 128 block; C = sum_kb sa[m][kb] * sb[n/128][kb] *
//        sum_{k in kb} qa * qb. The scales change inside the K loop, so a kernel must apply them to
//        each K block's partial sum: it cannot defer them to the epilogue.
// Scale layouts (fp32): sa [K/128][M] (the M rows of one K block contiguous: a CTA's 128 rows are one
// 512-byte run), sb [K/128][N/128]; per-tensor: one float each.
//
// The inputs are made as a real pipeline makes them: a seeded fp32 source uniform in [-1, 1) is
// quantized on the device (amax per scaling block, scale = amax / 448, code = e4m3(x / scale) with
// saturation: common/quant.hpp's rules). The reference is the exact arithmetic on the quantized inputs:
// products of e4m3 values are exact in fp32 (4 x 4 significant bits), each 128-wide K block is summed in
// fp32 in k order, scaled and added in fp32 (device_reference.cu; checked on the host at the test size).
//
// Bound: the tensor cores' FP8 rate (`aisp hw peaks`: tensor_fp8), 2 * size^3 FLOPs against M*K + N*K
// bytes of e4m3 and 2*M*N of bf16.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch19::fp8_gemm {

constexpr int k_scale_block = 128;  // the K (and N) extent of one block scale
constexpr int k_size_multiple = 256;

struct Args {
  const std::uint8_t* a;  // M x K e4m3 codes, row-major (K contiguous)
  const std::uint8_t* b;  // N x K e4m3 codes, row-major (K contiguous): C = A * B^T
  const float* scale_a;   // per-tensor: 1 float; block: [K/128][M]
  const float* scale_b;   // per-tensor: 1 float; block: [K/128][N/128]
  __nv_bfloat16* c;       // M x N, row-major
  int m, n, k;
  int scale_block;  // 0 = per-tensor, 128 = block scaling
  int sm_count;
};

// The number of scales of each operand for a scaling mode.
inline std::size_t scale_a_count(int m, int k, int scale_block) {
  return scale_block == 0 ? 1 : static_cast<std::size_t>(k / k_scale_block) * m;
}
inline std::size_t scale_b_count(int n, int k, int scale_block) {
  return scale_block == 0 ? 1 : static_cast<std::size_t>(k / k_scale_block) * (n / k_scale_block);
}

// Device side of generate() (device_reference.cu): quantize the sources, compute the reference.
void quantize_operands(const float* src_a, const float* src_b, const Args& a, float* amax_scratch,
                       cudaStream_t stream);
void reference_gemm(const Args& a, __nv_bfloat16* c_ref, cudaStream_t stream);

class Fp8GemmProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch19",
            .ladder = "fp8_gemm",
            .summary = "C = A * B^T, A and B FP8 e4m3 with fp32 scales, fp32 accumulate, bf16 out, M = N = K = size; "
                       "bound: FP8 tensor cores",
            .axes = {{.name = "size",
                      .default_value = 8192,
                      .help = "M = N = K (a multiple of 256); 2 * size^3 FLOPs",
                      .min_value = k_size_multiple,
                      .test_value = 512,
                      .default_sweep = {4096, 8192}},
                     {.name = "scale_block",
                      .default_value = 0,
                      .help = "0 = one fp32 scale per tensor; 128 = DeepSeek-V3 block scales (A 1x128, B 128x128)",
                      .min_value = 0,
                      .test_value = 0,
                      .default_sweep = {0, 128}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t size = axes.at("size");
    const std::int64_t block = axes.at("scale_block");
    if (size % k_size_multiple != 0 || size > 32768) {
      throw UsageError("ch19:fp8_gemm: size must be a multiple of " + std::to_string(k_size_multiple) +
                       " up to 32768 (every step tiles without tails), got " + std::to_string(size));
    }
    if (block != 0 && block != k_scale_block) {
      throw UsageError("ch19:fp8_gemm: scale_block must be 0 (per-tensor) or 128 (block scaling), got " +
                       std::to_string(block));
    }
    m_m = m_n = m_k = static_cast<int>(size);
    m_block = static_cast<int>(block);
    const std::size_t mk = static_cast<std::size_t>(m_m) * m_k, nk = static_cast<std::size_t>(m_n) * m_k;
    m_src_a = DeviceBuffer<float>(mk);
    m_src_b = DeviceBuffer<float>(nk);
    m_a = DeviceBuffer<std::uint8_t>(mk);
    m_b = DeviceBuffer<std::uint8_t>(nk);
    m_scale_a = DeviceBuffer<float>(scale_a_count(m_m, m_k, m_block));
    m_scale_b = DeviceBuffer<float>(scale_b_count(m_n, m_k, m_block));
    m_amax = DeviceBuffer<float>(2);
    m_c = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_c_ref = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_sm_count = device.sm_count;
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform({"src_a", m_src_a.data(), m_src_a.size(), DType::f32}, seed, -1.0, 1.0, stream);
    fill_uniform({"src_b", m_src_b.data(), m_src_b.size(), DType::f32}, seed ^ 0x9E3779B97F4A7C15ULL, -1.0, 1.0,
                 stream);
    quantize_operands(m_src_a.data(), m_src_b.data(), args(), m_amax.data(), stream);
    reference_gemm(args(), m_c_ref.data(), stream);
  }

  // The quantized operands and their scales are the inputs the variants read (hashed by the audit).
  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::u8},
            {"b", m_b.data(), m_b.size(), DType::u8},
            {"scale_a", m_scale_a.data(), m_scale_a.size(), DType::f32},
            {"scale_b", m_scale_b.data(), m_scale_b.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"c_ref", m_c_ref.data(), m_c_ref.size(), DType::bf16}};
  }

  // Against the exact arithmetic on the quantized inputs, a variant differs by
  // - the bf16 rounding of the output (rtol = 2^-7, as in ch10:hgemm), and
  // - its accumulation: summation order, the bf16 rounding of dequantized inputs (step 01), and on
  //   Hopper the FP8 wgmma's own accumulator, which keeps fewer bits than fp32 across many K steps
  //   (DeepSeek-V3 technical report, section 3.3.2) unless the kernel promotes each K block's partial
  //   sum to fp32 registers (steps 06, 07, 09-11). Measured on an H100 at K = 8192 with fast accumulation (steps
  //   02-05 and cuBLASLt's FAST_ACCUM alike): up to ~1.0 off on outputs of size ~80.
  // The tolerance is tied to what FP8 already costs: quantizing both inputs to e4m3 moves each product
  // by a relative error of rms ~ 2^-4 / sqrt(3) * sqrt(2), so an output (a sum of K products of rms 1/3,
  // inputs in [-1, 1)) moves by ~0.016 * sqrt(K) ~ 2^-6 * sqrt(K) from the unquantized product. A variant
  // may add at most that much again: atol = 2^-6 * sqrt(K) (1.41 at K = 8192, 1.0 at 4096), against
  // outputs of typical size sqrt(K / 9) ~ 30 and a wrong element's error of that order. Accumulation
  // error grows with K and quantization error with sqrt(K): at larger K fast accumulation stops passing.
  Tolerance tolerance() const override { return {0x1p-6 * std::sqrt(static_cast<double>(m_k)), 0x1p-7}; }

  Work work() const override {
    const double m = m_m, n = m_n, k = m_k;
    const double read = m * k + n * k + 4.0 * (scale_a_count(m_m, m_k, m_block) + scale_b_count(m_n, m_k, m_block));
    const double written = 2.0 * m * n;
    return {.bytes = read + written,
            .flops = 2.0 * m * n * k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "fp8"};
  }

  Args args() const override {
    return {m_a.data(), m_b.data(), m_scale_a.data(), m_scale_b.data(), m_c.data(), m_m, m_n, m_k, m_block,
            m_sm_count};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // device_reference.cu

 private:
  int m_m = 0, m_n = 0, m_k = 0, m_block = 0;
  DeviceBuffer<float> m_src_a, m_src_b;
  DeviceBuffer<std::uint8_t> m_a, m_b;
  DeviceBuffer<float> m_scale_a, m_scale_b, m_amax;
  DeviceBuffer<__nv_bfloat16> m_c, m_c_ref;
  int m_sm_count = 0;
};

}  // namespace aisp::ch19::fp8_gemm
