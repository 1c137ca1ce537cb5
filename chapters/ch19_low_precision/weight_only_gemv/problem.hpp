// ch19:weight_only_gemv — the contract of the weight-only quantized GEMV ladder: the decode-time
// matrix-vector product of one Linear layer,
//
//   y[b][row] = sum_k x[b][k] * W[row][k],   b < batch (1..16), row < n,
//
// with x and y bf16 and fp32 accumulation. W is n x k, row-major (k contiguous), as a Linear layer
// stores it, in the format the `bits` axis names:
//   16: bf16, 2 bytes a weight;
//    8: int8 codes in [-127, 127] and one fp32 scale per row (output channel);
//    4: int4 codes in [-7, 7], two per byte (low nibble first, common/quant.hpp's pack_int4), and one
//       fp32 scale per group of 128 consecutive k of a row.
// A weight's value is scale * code. Every step handles every format (a template on bits), so that one
// reference and one declared Work per problem instance judge all of them (the chapter's design rule).
//
// Inputs: x and the bf16 source weights are seeded uniform in [-1, 1); at bits 8 and 4, generate()
// quantizes the source on the device (per block: scale = amax / q_max, code = clamp(rint(w / scale)),
// bit-identical to quant.hpp) and the variants see only the codes and scales. The reference is the
// exact GEMV (fp64) on the dequantized weights, rounded to bf16 once; it is what a correct fp32 kernel
// computes up to summation order. The quantization error against bf16 is measured separately, once per
// generate(): the exact outputs with the quantized and with the bf16 weights, compared on the host; every
// variant reports the result as the facts err_vs_bf16_max and err_vs_bf16_rms (reference.hpp).
//
// Bound: the DRAM read of the format's bytes. At the defaults (n = 14336, k = 4096: Llama-3-8B's MLP
// gate/up projection) the weights are 117 MB (bf16), 58.7 MB (int8) or 29.4 MB + 1.8 MB of scales
// (int4), 10x to 2.5x the H100's 50 MB L2, and the ladder runs cold (L2 flushed before each sample).
#pragma once

#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "chapters/ch19_low_precision/weight_only_gemv/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch19::weight_only_gemv {

struct Args {
  const __nv_bfloat16* x;  // [batch][k]
  const void* w;           // bits 16: bf16 [n][k]; 8: int8 [n][k]; 4: bytes [n][k / 2], low nibble first
  const float* scales;     // bits 8: [n]; 4: [n][k / 128]; 16: nullptr
  __nv_bfloat16* y;        // [batch][n]
  int batch, n, k, bits;
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
  int smem_optin_bytes;    // shared memory a block may opt in to
  const QuantError* error; // host memory: the quantization error of this generate() (bits 8 and 4)
};

// The trusted device reference (device_reference.cu): one thread per output, fp64 sum over k of
// x * (scale * code) (or x * w at bits 16), in k order. `w`, `scales` and `bits` as in Args.
void launch_reference(const __nv_bfloat16* x, const void* w, const float* scales, int bits, const Shape& s,
                      double* y_exact, cudaStream_t stream);
// y_exact rounded to bf16, once.
void round_to_bf16(const double* y_exact, __nv_bfloat16* y, std::size_t count, cudaStream_t stream);
// The bf16 weights quantized as the Shape's bits say: codes (int8 bytes, or packed int4) and scales.
void quantize_on_device(const __nv_bfloat16* w16, const Shape& s, std::uint8_t* codes, float* scales,
                        int sm_count, cudaStream_t stream);

// The quantization-error facts every variant reports (none at bits 16: nothing was quantized).
inline std::vector<Fact> error_facts(const Args& a) {
  if (a.bits == 16 || a.error == nullptr) return {};
  const auto fmt = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return std::string(text);
  };
  return {{"err_vs_bf16_max", fmt(a.error->max_rel)}, {"err_vs_bf16_rms", fmt(a.error->rms_rel)}};
}

class WeightOnlyGemvProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch19",
            .ladder = "weight_only_gemv",
            .summary = "decode GEMV y = x W^T, bf16 x/y, W as bf16, int8 (per-row scale) or int4 (group 128); "
                       "bound: DRAM read of the format's bytes",
            .axes = {{.name = "batch", .default_value = 1, .help = "rows of x (decode tokens), 1 to 16",
                      .test_value = 2, .default_sweep = {1, 4, 16}},
                     {.name = "bits", .default_value = 4,
                      .help = "weight format: 16 (bf16), 8 (int8, fp32 scale per row), 4 (int4, fp32 scale per 128 k)",
                      .min_value = 4, .default_sweep = {16, 8, 4}},
                     // 203 rows: not a multiple of any step's rows per warp or block, so tails run.
                     {.name = "n", .default_value = 14336, .help = "output features (rows of W)", .test_value = 203},
                     // 640: 5 int4 groups, and fewer 16-byte vectors per row than lanes at int4 (20).
                     {.name = "k", .default_value = 4096, .help = "input features, a multiple of 128",
                      .min_value = k_group, .test_value = 640}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    // Refused before the narrowing to int below could turn a huge value into a plausible one.
    for (const char* name : {"batch", "n", "k", "bits"}) {
      if (axes.at(name) > (1 << 24)) {
        throw UsageError(std::string("ch19:weight_only_gemv: ") + name + " must be at most 2^24");
      }
    }
    m_shape = {.batch = static_cast<int>(axes.at("batch")),
               .n = static_cast<int>(axes.at("n")),
               .k = static_cast<int>(axes.at("k")),
               .bits = static_cast<int>(axes.at("bits"))};
    check_shape(m_shape);
    const std::size_t out_count = static_cast<std::size_t>(m_shape.batch) * m_shape.n;
    m_x = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_shape.batch) * m_shape.k);
    m_w16 = DeviceBuffer<__nv_bfloat16>(m_shape.weight_count());
    if (m_shape.bits != 16) {
      m_codes = DeviceBuffer<std::uint8_t>(m_shape.weight_bytes());
      m_scales = DeviceBuffer<float>(m_shape.scale_count());
      m_exact16 = DeviceBuffer<double>(out_count);
    }
    m_y = DeviceBuffer<__nv_bfloat16>(out_count);
    m_ref = DeviceBuffer<__nv_bfloat16>(out_count);
    m_exact = DeviceBuffer<double>(out_count);
    m_sm_count = device.sm_count;
    m_smem_optin = static_cast<int>(device.smem_per_block_optin_bytes);
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform({"x", m_x.data(), m_x.size(), DType::bf16}, seed, -1.0, 1.0, stream);
    fill_uniform({"w_bf16", m_w16.data(), m_w16.size(), DType::bf16}, seed ^ 0x57575757ull, -1.0, 1.0, stream);
    if (m_shape.bits == 16) {
      launch_reference(m_x.data(), m_w16.data(), nullptr, 16, m_shape, m_exact.data(), stream);
    } else {
      quantize_on_device(m_w16.data(), m_shape, m_codes.data(), m_scales.data(), m_sm_count, stream);
      launch_reference(m_x.data(), m_codes.data(), m_scales.data(), m_shape.bits, m_shape, m_exact.data(), stream);
      launch_reference(m_x.data(), m_w16.data(), nullptr, 16, m_shape, m_exact16.data(), stream);
      std::vector<double> yq(m_exact.size()), y16(m_exact16.size());
      AISP_CUDA_CHECK(cudaMemcpyAsync(yq.data(), m_exact.data(), m_exact.bytes(), cudaMemcpyDeviceToHost, stream));
      AISP_CUDA_CHECK(cudaMemcpyAsync(y16.data(), m_exact16.data(), m_exact16.bytes(), cudaMemcpyDeviceToHost, stream));
      AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // pageable copies: the vectors must be filled
      m_error = quant_error(yq, y16);
    }
    round_to_bf16(m_exact.data(), m_ref.data(), m_ref.size(), stream);
  }

  // What the variants read: x and the weights in the run's format (the bf16 source is not an input at
  // bits 8 and 4: no variant may read it).
  std::vector<TensorView> inputs() const override {
    std::vector<TensorView> v = {{"x", m_x.data(), m_x.size(), DType::bf16}};
    if (m_shape.bits == 16) {
      v.push_back({"w", m_w16.data(), m_w16.size(), DType::bf16});
    } else {
      v.push_back({"w_codes", m_codes.data(), m_codes.size(), DType::u8});
      v.push_back({"w_scales", m_scales.data(), m_scales.size(), DType::f32});
    }
    return v;
  }
  std::vector<TensorView> outputs() const override { return {{"y", m_y.data(), m_y.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"y_ref", m_ref.data(), m_ref.size(), DType::bf16}};
  }

  // rtol 2^-7: the reference rounds its exact result to bf16 once, a variant its fp32 result once; two
  // values a hair apart can round to neighbouring bf16 values, one ulp = at most 2^-7 of the value apart.
  // atol: the fp32 accumulation over k in any order, derived in reference.hpp (gemv_atol: 3.9e-3 at
  // k = 4096 against a typical |y| of 21). The same for every format: the reference is exact on the
  // dequantized weights, so the quantization error is not in the tolerance; it is reported as facts.
  Tolerance tolerance() const override { return {gemv_atol(m_shape.k), 0x1.0p-7}; }

  // Minimum traffic: the weights in the run's format and their scales, once; x once (it is reused from
  // on-chip memory by every row); y written once. FLOPs: 2 * batch * n * k multiply-adds, declared fp32
  // because every step (not the vendor's tensor-core GEMM, which declares bf16) does them on the FP32
  // pipes: at batch 16 the FP32 rate, not DRAM, is the bound (report's "% of ceiling" says which).
  Work work() const override {
    const double out = 2.0 * m_shape.batch * static_cast<double>(m_shape.n);
    const double read = static_cast<double>(m_shape.weight_bytes()) + 4.0 * static_cast<double>(m_shape.scale_count()) +
                        2.0 * m_shape.batch * static_cast<double>(m_shape.k);
    return {.bytes = read + out,
            .flops = 2.0 * m_shape.batch * static_cast<double>(m_shape.n) * m_shape.k,
            .bytes_read = read,
            .bytes_written = out,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    const void* w = m_shape.bits == 16 ? static_cast<const void*>(m_w16.data()) : m_codes.data();
    return {m_x.data(), w, m_shape.bits == 16 ? nullptr : m_scales.data(), m_y.data(),
            m_shape.batch, m_shape.n, m_shape.k, m_shape.bits, m_sm_count, m_smem_optin, &m_error};
  }

  bool has_host_reference() const override { return true; }
  // At the test size: the device's quantization (codes and scales, exactly), its reference output (under
  // the tolerance) and its error facts (to 1e-9), each against the host's from the same bf16 inputs.
  std::string check_reference_on_host(cudaStream_t stream) override;

 private:
  Shape m_shape;
  DeviceBuffer<__nv_bfloat16> m_x, m_w16, m_y, m_ref;
  DeviceBuffer<std::uint8_t> m_codes;
  DeviceBuffer<float> m_scales;
  DeviceBuffer<double> m_exact, m_exact16;
  QuantError m_error;
  int m_sm_count = 0;
  int m_smem_optin = 0;
};

// The batch accumulators live in registers, so every step is compiled for a few batch capacities; a
// batch runs in the smallest one that holds it (2 and 3 in 4, 5 to 8 in 8), rows past the batch
// predicated off by a warp-uniform branch.
inline int batch_capacity(int batch) { return batch == 1 ? 1 : batch <= 4 ? 4 : batch <= 8 ? 8 : 16; }

// Calls f.template operator()<Bits, BMax>() with the run's format and batch capacity as compile-time
// constants. check_shape allowed exactly these values.
template <class F>
decltype(auto) with_config(const Args& a, F&& f) {
  const auto with_bits = [&]<int BMax>() -> decltype(auto) {
    if (a.bits == 16) return f.template operator()<16, BMax>();
    if (a.bits == 8) return f.template operator()<8, BMax>();
    return f.template operator()<4, BMax>();
  };
  switch (batch_capacity(a.batch)) {
    case 1: return with_bits.template operator()<1>();
    case 4: return with_bits.template operator()<4>();
    case 8: return with_bits.template operator()<8>();
    default: return with_bits.template operator()<16>();
  }
}

}  // namespace aisp::ch19::weight_only_gemv
