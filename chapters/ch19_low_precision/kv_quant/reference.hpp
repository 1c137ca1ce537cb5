// ch19:kv_quant — host side of the ladder: the shape and the contiguous cache layout, the FP8 quantizer
// of a KV cache (the same rules as the device's, through common/quant.hpp), decode attention in plain
// C++ double precision (the CPU reference at test sizes), and the error measure of the quantized
// output against the bf16 one. No CUDA headers: the CPU tests include this file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "chapters/ch19_low_precision/common/quant.hpp"

namespace aisp::ch19::kv_quant {

// One decode step's attention: every sequence has one query token per query head and `context` cached
// tokens. Query head h reads KV head h / group(). The ladder runs Llama-3-8B's attention shape (the
// defaults); the CPU tests use smaller ones.
struct Shape {
  int batch = 0;
  int context = 0;
  int heads = 32;
  int kv_heads = 8;
  int head_dim = 128;

  int group() const { return heads / kv_heads; }  // query heads per KV head (grouped-query attention)

  // k and v: [batch][kv_heads][context][head_dim]. One (sequence, KV head) is a contiguous context x
  // head_dim block, the unit that owns one scale.
  std::size_t kv_index(int b, int kvh, int t, int d) const {
    return ((static_cast<std::size_t>(b) * kv_heads + kvh) * context + t) * head_dim + d;
  }
  std::size_t kv_count() const { return kv_index(batch, 0, 0, 0); }
  std::size_t block_elems() const { return static_cast<std::size_t>(context) * head_dim; }
  std::size_t scale_count() const { return static_cast<std::size_t>(batch) * kv_heads; }
  std::size_t q_count() const { return static_cast<std::size_t>(batch) * heads * head_dim; }
};

// An FP8 e4m3 cache: one code per element and one scale per (sequence, KV head); element x is stored as
// e4m3(x / scale) and read back as decode(code) * scale.
struct QuantizedCache {
  std::vector<std::uint8_t> codes;  // same layout as the source
  std::vector<float> scales;        // [batch][kv_heads]
};

// scale = amax(block) / 448 (1 for an all-zero block), code = e4m3(x / scale) with round to nearest
// even and saturation: what the device quantizer (device_reference.cu) does with cuda_fp8.h.
inline QuantizedCache quantize_cache(const Shape& s, std::span<const float> x) {
  QuantizedCache q{std::vector<std::uint8_t>(x.size()), std::vector<float>(s.scale_count())};
  const std::size_t n = s.block_elems();
  for (std::size_t blk = 0; blk < s.scale_count(); ++blk) {
    const auto block = x.subspan(blk * n, n);
    const float scale = quant_scale(abs_max(block), k_e4m3_max);
    q.scales[blk] = scale;
    for (std::size_t i = 0; i < n; ++i) q.codes[blk * n + i] = e4m3_encode(block[i] / scale);
  }
  return q;
}

// The values the attention reads from an FP8 cache: decode(code) * scale, the product rounded to float
// as the device computes it.
inline std::vector<double> dequantize_cache(const Shape& s, std::span<const std::uint8_t> codes,
                                            std::span<const float> scales) {
  std::vector<double> x(codes.size());
  const std::size_t n = s.block_elems();
  for (std::size_t i = 0; i < codes.size(); ++i) x[i] = e4m3_decode(codes[i]) * scales[i / n];
  return x;
}

// out[b][h][:] = sum_t softmax_t(scale * q[b][h] . k_t) v_t over the sequence's `context` tokens of KV
// head h / group(), with scale = 1 / sqrt(head_dim), in double.
inline std::vector<double> decode_attention(const Shape& s, const std::vector<double>& q,
                                            const std::vector<double>& k, const std::vector<double>& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> out(s.q_count());
  std::vector<double> w(static_cast<std::size_t>(s.context));
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / s.group();
      const double* qh = q.data() + (static_cast<std::size_t>(b) * s.heads + h) * s.head_dim;
      double m = -INFINITY;
      for (int t = 0; t < s.context; ++t) {
        const double* kt = k.data() + s.kv_index(b, kvh, t, 0);
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) dot += qh[d] * kt[d];
        w[t] = scale * dot;
        m = std::max(m, w[t]);
      }
      double sum = 0;
      for (int t = 0; t < s.context; ++t) sum += (w[t] = std::exp(w[t] - m));
      double* o = out.data() + (static_cast<std::size_t>(b) * s.heads + h) * s.head_dim;
      for (int t = 0; t < s.context; ++t) {
        const double* vt = v.data() + s.kv_index(b, kvh, t, 0);
        for (int d = 0; d < s.head_dim; ++d) o[d] += w[t] / sum * vt[d];
      }
    }
  }
  return out;
}

// How far an output `got` is from a `base` output, relative to the typical size of base: max and rms of
// |got - base| over all elements, both divided by rms(base). (Not an elementwise relative error, which
// explodes on outputs near zero.) The ladder's err_vs_bf16_max and err_vs_bf16_rms facts.
struct RelativeError {
  double max = 0;
  double rms = 0;
};

inline RelativeError relative_error(std::span<const float> got, std::span<const float> base) {
  double sq_base = 0, sq_diff = 0, max_diff = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - base[i]);
    sq_diff += d * d;
    sq_base += static_cast<double>(base[i]) * base[i];
    max_diff = std::max(max_diff, d);
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, base.size()));
  const double rms_base = std::sqrt(sq_base / n);
  if (rms_base == 0) return {max_diff == 0 ? 0.0 : INFINITY, sq_diff == 0 ? 0.0 : INFINITY};
  return {max_diff / rms_base, std::sqrt(sq_diff / n) / rms_base};
}

}  // namespace aisp::ch19::kv_quant
