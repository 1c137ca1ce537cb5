// ch19:kv_quant — the contract of the FP8 KV-cache ladder: decode attention, one new query token per
// sequence attending to that sequence's whole KV cache, with the cache stored in bf16 (cache_bits 16) or
// in FP8 e4m3 with one scale per (sequence, KV head) for K and one for V (cache_bits 8).
//
//   out[b][h][:] = sum_t softmax_t(q[b][h] . k[b][t] / sqrt(head_dim)) v[b][t],   t < context,
//
// with grouped-query attention at Llama-3-8B's shape: 32 query heads, 8 KV heads, head_dim 128; query
// head h reads KV head h / 4. q is bf16, arithmetic and softmax statistics fp32, the output bf16.
//
// Layout (contiguous, simpler than a paged cache: ch16:paged_attention is the paged version):
//   q, out      [batch][heads][head_dim]                 bf16
//   k, v        [batch][kv_heads][context][head_dim]     bf16, or e4m3 codes (1 byte)
//   k_scale,
//   v_scale     [batch][kv_heads]                         float, cache_bits 8 only
// Element x of block (b, kv head) is stored as e4m3(x / scale) and read as decode(code) * scale.
//
// One problem, two formats (the chapter's design rule): the format is an axis, every step supports
// both, and the gate checks each run against the exact computation on the values the cache holds. At
// cache_bits 8, generate() quantizes the same seeded bf16 source the bf16 run uses (scale = amax / 448,
// code = e4m3(x / scale), round to nearest even, saturating), computes the reference on the dequantized
// cache and, for the facts, the reference on the bf16 source: err_vs_bf16_max / err_vs_bf16_rms are the
// max and rms of |out_fp8 - out_bf16| over all outputs, divided by the rms of out_bf16.
//
// Bound: the DRAM read of the cache at its format. At the defaults (16 sequences x 8192 tokens x 8 KV
// heads x 128 x 2 (K and V)) that is 537 MB at bf16, 268 MB at FP8: 5 to 10x the L2, and cold runs
// flush the L2 before each sample.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "chapters/ch19_low_precision/kv_quant/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch19::kv_quant {

// Llama-3-8B's attention shape, fixed: the kernels keep a group's queries and accumulators in registers.
constexpr int k_heads = 32;
constexpr int k_kv_heads = 8;
constexpr int k_head_dim = 128;
constexpr int k_group = k_heads / k_kv_heads;  // query heads per KV head

struct Args {
  const __nv_bfloat16* q;  // [batch][heads][head_dim]
  const void* k;           // [batch][kv_heads][context][head_dim]: __nv_bfloat16 or __nv_fp8_e4m3
  const void* v;           // same layout as k
  const float* k_scale;    // [batch][kv_heads]; nullptr at cache_bits 16
  const float* v_scale;
  __nv_bfloat16* out;      // [batch][heads][head_dim]
  int batch, context, cache_bits;
  float softmax_scale;     // 1 / sqrt(head_dim)
  int sm_count;            // from the device: launch geometry never hard-codes a GPU
  // Host-side only, never read by a kernel: the quantization error of this input (generate()), for the
  // variants' facts. NaN at cache_bits 16.
  double err_vs_bf16_max, err_vs_bf16_rms;
};

template <class T>
constexpr bool is_fp8 = std::is_same_v<T, __nv_fp8_e4m3>;

// Calls f.template operator()<T>() with the run's cache element type.
template <class F>
void with_format(const Args& a, F&& f) {
  if (a.cache_bits == 16) {
    f.template operator()<__nv_bfloat16>();
  } else {
    f.template operator()<__nv_fp8_e4m3>();
  }
}

// The trusted device reference (device_reference.cu), fp32 and plain: one thread per score into
// `scores` (batch x heads x context floats), a softmax per (sequence, head), then one thread per output
// value summing p_t v_t. Writes the bf16 reference and the same values before rounding (ref_f32).
// check_reference_on_host checks it against reference.hpp at the test size.
void launch_reference(const Args& a, float* scores, __nv_bfloat16* ref, float* ref_f32,
                      cudaStream_t stream);

// FP8 quantization of a bf16 cache, one scale per block of block_elems contiguous values:
// scales[blk] = amax / 448 (1 for an all-zero block), codes[i] = e4m3(x / scale), saturating.
void quantize_blocks(const __nv_bfloat16* src, std::int64_t blocks, std::int64_t block_elems,
                     std::uint8_t* codes, float* scales, int sm_count, cudaStream_t stream);

// The err_vs_bf16_* facts every variant reports at cache_bits 8 (none at 16).
inline std::vector<Fact> quant_facts(const Args& a) {
  if (a.cache_bits == 16) return {};
  const auto fmt = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3e", x);
    return std::string(buf);
  };
  return {{"err_vs_bf16_max", fmt(a.err_vs_bf16_max)}, {"err_vs_bf16_rms", fmt(a.err_vs_bf16_rms)}};
}

class KvQuantProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch19",
            .ladder = "kv_quant",
            .summary = "decode attention over a bf16 or FP8 (per-head scales) KV cache, GQA 32/8 x 128; "
                       "bound: DRAM read of the cache",
            .axes = {{.name = "batch", .default_value = 16, .help = "sequences, one query token each",
                      .test_value = 3},
                     {.name = "context", .default_value = 8192,
                      .help = "cached tokens per sequence (every sequence the same)",
                      // Not a multiple of the 64-token split unit nor of any tile: the last split holds 8
                      // tokens, less than one warp's tile, and three of its four warps have none.
                      .test_value = 200,
                      .default_sweep = {1024, 4096, 16384, 32768}},
                     {.name = "cache_bits", .default_value = 8,
                      .help = "KV cache format: 16 = bf16, 8 = FP8 e4m3 with per-(sequence, KV head) scales",
                      .min_value = 8,
                      .test_value = 8,
                      .default_sweep = {16, 8}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t bits = axes.at("cache_bits");
    if (bits != 16 && bits != 8) {
      throw UsageError("ch19:kv_quant: cache_bits must be 16 (bf16) or 8 (FP8 e4m3), got " +
                       std::to_string(bits));
    }
    const std::int64_t batch = axes.at("batch"), context = axes.at("context");
    // Offsets are 64-bit in every kernel; the grids hold batch x heads blocks in x and the scores buffer
    // batch x heads x context floats: keep both far from int32 limits.
    if (batch > 4096 || context > (1 << 22)) {
      throw UsageError("ch19:kv_quant: batch must be <= 4096 and context <= 4194304, got batch=" +
                       std::to_string(batch) + " context=" + std::to_string(context));
    }
    m_shape = {.batch = static_cast<int>(batch), .context = static_cast<int>(context)};
    m_bits = static_cast<int>(bits);
    const std::size_t q = m_shape.q_count(), kv = m_shape.kv_count();
    m_q = DeviceBuffer<__nv_bfloat16>(q);
    m_k16 = DeviceBuffer<__nv_bfloat16>(kv);
    m_v16 = DeviceBuffer<__nv_bfloat16>(kv);
    m_out = DeviceBuffer<__nv_bfloat16>(q);
    m_ref = DeviceBuffer<__nv_bfloat16>(q);
    m_ref_f32 = DeviceBuffer<float>(q);
    m_scores = DeviceBuffer<float>(static_cast<std::size_t>(m_shape.batch) * m_shape.heads *
                                   m_shape.context);
    if (m_bits == 8) {
      m_k8 = DeviceBuffer<std::uint8_t>(kv);
      m_v8 = DeviceBuffer<std::uint8_t>(kv);
      m_k_scale = DeviceBuffer<float>(m_shape.scale_count());
      m_v_scale = DeviceBuffer<float>(m_shape.scale_count());
      m_base_ref = DeviceBuffer<__nv_bfloat16>(q);
      m_base_f32 = DeviceBuffer<float>(q);
    }
    m_sm_count = device.sm_count;
  }

  // q in [-6, 6), k and v in [-1, 1) (as ch16:paged_attention): a score q.k / sqrt(d) has a standard
  // deviation of 2, so the softmax is neither flat nor one-hot. Each (sequence, KV head) block's amax is
  // then ~1, and its scale ~1/448.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform({"q", m_q.data(), m_q.size(), DType::bf16}, seed, -6.0, 6.0, stream);
    fill_uniform({"k16", m_k16.data(), m_k16.size(), DType::bf16}, seed ^ 0x4b4b4b4bull, -1.0, 1.0, stream);
    fill_uniform({"v16", m_v16.data(), m_v16.size(), DType::bf16}, seed ^ 0x56565656ull, -1.0, 1.0, stream);
    m_err = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    if (m_bits == 16) {
      launch_reference(args(), m_scores.data(), m_ref.data(), m_ref_f32.data(), stream);
      return;
    }
    const auto blocks = static_cast<std::int64_t>(m_shape.scale_count());
    const auto block_elems = static_cast<std::int64_t>(m_shape.block_elems());
    quantize_blocks(m_k16.data(), blocks, block_elems, m_k8.data(), m_k_scale.data(), m_sm_count, stream);
    quantize_blocks(m_v16.data(), blocks, block_elems, m_v8.data(), m_v_scale.data(), m_sm_count, stream);
    launch_reference(bf16_args(), m_scores.data(), m_base_ref.data(), m_base_f32.data(), stream);
    launch_reference(args(), m_scores.data(), m_ref.data(), m_ref_f32.data(), stream);
    // The quantization error, from the fp32 outputs before their bf16 rounding (256 KB at the defaults).
    std::vector<float> fp8(m_ref_f32.size()), base(m_base_f32.size());
    AISP_CUDA_CHECK(cudaMemcpyAsync(fp8.data(), m_ref_f32.data(), m_ref_f32.bytes(), cudaMemcpyDeviceToHost,
                                    stream));
    AISP_CUDA_CHECK(cudaMemcpyAsync(base.data(), m_base_f32.data(), m_base_f32.bytes(),
                                    cudaMemcpyDeviceToHost, stream));
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_err = relative_error(fp8, base);
  }

  std::vector<TensorView> inputs() const override {
    if (m_bits == 16) {
      return {{"q", m_q.data(), m_q.size(), DType::bf16},
              {"k", m_k16.data(), m_k16.size(), DType::bf16},
              {"v", m_v16.data(), m_v16.size(), DType::bf16}};
    }
    return {{"q", m_q.data(), m_q.size(), DType::bf16},
            {"k", m_k8.data(), m_k8.size(), DType::u8},
            {"v", m_v8.data(), m_v8.size(), DType::u8},
            {"k_scale", m_k_scale.data(), m_k_scale.size(), DType::f32},
            {"v_scale", m_v_scale.data(), m_v_scale.size(), DType::f32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"out", m_out.data(), m_out.size(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_ref.size(), DType::bf16}};
  }

  // rtol 2^-7: the reference and a variant each round an fp32 result to bf16 once; two values a hair
  // apart can land on neighbouring bf16 values, one ulp apart, and one bf16 ulp is at most 2^-7 of the
  // value. atol 2e-4, for the fp32 arithmetic before that rounding, which differs between the reference
  // (natural exp, a dot product per score, a tree-summed denominator, a sequential sum per output) and
  // the steps (exp2 with log2(e) folded into q, online rescaling, split and warp merges, at FP8 the
  // scales applied per chunk instead of per element). Each operation errs by a few fp32 ulp relative
  // (~1e-7); a score error e (in nats) moves the output by at most ~2e (|v| <= 1), and scores are at most
  // ~10 in size, so the score path costs ~1e-6; the sums over up to 32768 tokens grow like sqrt(n) in
  // practice, ~1e-5 relative at worst. 2e-4 leaves >= 20x over that, yet is far below the FP8 error
  // this ladder is about (napkin math: e4m3 keeps 3 mantissa bits, ~2^-5 relative rms per element;
  // averaged over the ~150 tokens that carry the softmax weight, that is ~1e-3 absolute on outputs of
  // typical size 0.03 to 0.05): a step that read a differently-quantized cache would fail.
  Tolerance tolerance() const override { return {2e-4, 0x1.0p-7}; }

  // Minimum traffic: the K and V rows of the `context` tokens once each at the run's format, q, and at
  // FP8 the two scales per (sequence, KV head); out written once. The split steps' partial results are
  // scratch a perfect kernel would not need and are not counted. FLOPs (fp32): 2 per q.k multiply-add and
  // 2 per p*v multiply-add, 4 * batch * heads * context * head_dim; exp, rescaling and the FP8 decoding
  // are left out. At the defaults 2.1 GFLOP: against ~60 TFLOP/s of fp32 FMA that is ~35 us, while the
  // FP8 cache's 268 MB take ~80 us at ~3.3 TB/s: memory-bound, but only by ~2x (the ratio is the same
  // 4 FLOP per KV element at both formats, so halving the bytes halves the margin).
  Work work() const override {
    const double elem_bytes = m_bits / 8.0;
    const double kv = 2.0 * elem_bytes * static_cast<double>(m_shape.kv_count());
    const double qo = 2.0 * static_cast<double>(m_shape.q_count());
    const double scales = m_bits == 8 ? 2.0 * 4.0 * static_cast<double>(m_shape.scale_count()) : 0.0;
    const double read = kv + qo + scales;
    return {.bytes = read + qo,
            .flops = 4.0 * m_shape.batch * static_cast<double>(m_shape.heads) * m_shape.context *
                     m_shape.head_dim,
            .bytes_read = read,
            .bytes_written = qo,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    if (m_bits == 16) return bf16_args();
    Args a = bf16_args();
    a.k = m_k8.data();
    a.v = m_v8.data();
    a.k_scale = m_k_scale.data();
    a.v_scale = m_v_scale.data();
    a.cache_bits = 8;
    a.err_vs_bf16_max = m_err.max;
    a.err_vs_bf16_rms = m_err.rms;
    return a;
  }

  bool has_host_reference() const override { return true; }
  // At FP8: the device's codes and scales must equal the host quantizer's bit for bit (same rules), the
  // reference must match attention in double on the dequantized cache, and the bf16 reference the facts
  // use must match attention in double on the bf16 source.
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto q = to_host({"q", m_q.data(), m_q.size(), DType::bf16}, stream);
    const auto k16 = to_host({"k16", m_k16.data(), m_k16.size(), DType::bf16}, stream);
    const auto v16 = to_host({"v16", m_v16.data(), m_v16.size(), DType::bf16}, stream);
    const auto ref = to_host(references()[0], stream);
    const auto base_want = decode_attention(m_shape, q, k16, v16);
    if (m_bits == 16) return compare_on_host("out_ref", ref, base_want, tolerance());

    const auto base = to_host({"base_ref", m_base_ref.data(), m_base_ref.size(), DType::bf16}, stream);
    if (auto why = compare_on_host("bf16 base_ref", base, base_want, tolerance()); !why.empty()) {
      return why;
    }
    const auto ins = inputs();
    std::vector<double> dequant[2];
    for (int kv = 0; kv < 2; ++kv) {
      const std::vector<float> src((kv == 0 ? k16 : v16).begin(), (kv == 0 ? k16 : v16).end());
      const QuantizedCache want = quantize_cache(m_shape, src);
      const auto codes_d = to_host(ins[1 + kv], stream);
      const auto scales_d = to_host(ins[3 + kv], stream);
      for (std::size_t i = 0; i < want.scales.size(); ++i) {
        if (static_cast<float>(scales_d[i]) != want.scales[i]) {
          return ins[3 + kv].name + "[" + std::to_string(i) + "] = " + std::to_string(scales_d[i]) +
                 ", the host quantizer says " + std::to_string(want.scales[i]);
        }
      }
      std::vector<std::uint8_t> codes(codes_d.size());
      for (std::size_t i = 0; i < codes.size(); ++i) {
        codes[i] = static_cast<std::uint8_t>(codes_d[i]);
        if (codes[i] != want.codes[i]) {
          return ins[1 + kv].name + " code [" + std::to_string(i) + "] = " + std::to_string(codes[i]) +
                 ", the host quantizer says " + std::to_string(want.codes[i]);
        }
      }
      dequant[kv] = dequantize_cache(m_shape, codes, want.scales);
    }
    const auto want = decode_attention(m_shape, q, dequant[0], dequant[1]);
    return compare_on_host("out_ref", ref, want, tolerance());
  }

 private:
  // The bf16 cache's arguments: the run's own at cache_bits 16, the facts' baseline at 8.
  Args bf16_args() const {
    return {m_q.data(),
            m_k16.data(),
            m_v16.data(),
            nullptr,
            nullptr,
            m_out.data(),
            m_shape.batch,
            m_shape.context,
            16,
            1.0f / std::sqrt(static_cast<float>(m_shape.head_dim)),
            m_sm_count,
            std::numeric_limits<double>::quiet_NaN(),
            std::numeric_limits<double>::quiet_NaN()};
  }

  Shape m_shape;
  int m_bits = 8;
  DeviceBuffer<__nv_bfloat16> m_q, m_k16, m_v16, m_out, m_ref, m_base_ref;
  DeviceBuffer<std::uint8_t> m_k8, m_v8;
  DeviceBuffer<float> m_k_scale, m_v_scale, m_ref_f32, m_base_f32, m_scores;
  int m_sm_count = 0;
  RelativeError m_err{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
};

// log2(e): every step folds softmax_scale * log2(e) into q once and takes exp2f of the scores, one ex2
// per score (CUDA C++ Programming Guide, "Mathematical Functions": exp2f, 2 ulp).
constexpr float k_log2e = 1.4426950408889634f;

}  // namespace aisp::ch19::kv_quant
