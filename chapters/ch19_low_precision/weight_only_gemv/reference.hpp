// ch19:weight_only_gemv — host side of the ladder: the shape and its limits, the weight quantization
// (int8 per output channel, int4 per group of 128 along k, with common/quant.hpp's rules), the GEMV in
// double on the dequantized weights (the CPU reference at test sizes), the error against the bf16
// weights' output, and the tolerance. No CUDA headers: the CPU tests include this file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chapters/ch19_low_precision/common/quant.hpp"
#include "core/base/error.hpp"

namespace aisp::ch19::weight_only_gemv {

constexpr int k_group = 128;      // int4: one scale per 128 consecutive k of a row
constexpr int k_int8_max = 127;   // symmetric int8 codes in [-127, 127]
constexpr int k_int4_max = 7;     // symmetric int4 codes in [-7, 7]
constexpr int k_max_batch = 16;   // the steps keep batch accumulators in registers

// y[b][row] = sum_k x[b][k] * W[row][k]; W is n x k, row-major (k contiguous), stored as `bits`.
struct Shape {
  int batch = 0;
  int n = 0;
  int k = 0;
  int bits = 16;  // 16: bf16; 8: int8 + an fp32 scale per row; 4: int4 (two per byte) + an fp32 scale per group

  int groups() const { return k / k_group; }  // int4 groups per row
  std::size_t weight_count() const { return static_cast<std::size_t>(n) * k; }
  std::size_t weight_bytes() const { return weight_count() * static_cast<std::size_t>(bits) / 8; }
  std::size_t scale_count() const {
    if (bits == 8) return static_cast<std::size_t>(n);
    if (bits == 4) return static_cast<std::size_t>(n) * groups();
    return 0;
  }
  // The values one scale covers: a row for int8, a group for int4 (0 for bf16: no scales).
  int block_len() const { return bits == 8 ? k : (bits == 4 ? k_group : 0); }
  int q_max() const { return bits == 8 ? k_int8_max : k_int4_max; }
};

// What every step assumes, refused once with a one-line message (std::to_string, not fmt: nvcc's front
// end rejects fmt's consteval format strings, and problem.hpp is compiled by nvcc).
inline void check_shape(const Shape& s) {
  const auto fail = [](const std::string& why) { throw UsageError("ch19:weight_only_gemv: " + why); };
  if (s.bits != 16 && s.bits != 8 && s.bits != 4) {
    fail("bits must be 16 (bf16), 8 (int8) or 4 (int4), got " + std::to_string(s.bits));
  }
  if (s.batch < 1 || s.batch > k_max_batch) {
    fail("batch must be 1 to " + std::to_string(k_max_batch) + ", got " + std::to_string(s.batch));
  }
  // 128 covers the int4 group and every step's 16-byte vector (8 bf16, 16 int8 or 32 int4 values).
  if (s.k < k_group || s.k % k_group != 0 || s.k > (1 << 20)) {
    fail("k must be a multiple of 128 up to 2^20, got " + std::to_string(s.k));
  }
  if (s.n < 1 || s.n > (1 << 24)) fail("n must be 1 to 2^24, got " + std::to_string(s.n));
}

// The quantized weights as the device stores them, unpacked: one code per weight (row-major, n x k) and
// the scales (n for int8, n x groups for int4). A weight's dequantized value is scale * code.
struct QuantizedWeights {
  std::vector<int> codes;
  std::vector<float> scales;
};

// Quantizes bf16 weights (given as their float values) the way the problem's device kernel does: per
// block (a row for int8, a group of 128 for int4) scale = amax / q_max (1 for an all-zero block), code =
// clamp(rint(w / scale)) with ties to even (quant.hpp).
inline QuantizedWeights quantize_weights(const Shape& s, std::span<const float> w) {
  QuantizedWeights out;
  out.codes.resize(s.weight_count());
  const int len = s.block_len();
  const std::size_t blocks = s.weight_count() / static_cast<std::size_t>(len);
  out.scales.resize(blocks);
  for (std::size_t blk = 0; blk < blocks; ++blk) {
    const auto values = w.subspan(blk * len, static_cast<std::size_t>(len));
    const float scale = quant_scale(abs_max(values), static_cast<float>(s.q_max()));
    out.scales[blk] = scale;
    for (int i = 0; i < len; ++i) out.codes[blk * len + i] = quantize_symmetric(values[i], scale, s.q_max());
  }
  return out;
}

// scale * code for every weight, exactly (a 24-bit by 4- or 8-bit product fits a double).
inline std::vector<double> dequantize(const Shape& s, const QuantizedWeights& q) {
  std::vector<double> w(s.weight_count());
  const std::size_t len = static_cast<std::size_t>(s.block_len());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(q.scales[i / len]) * q.codes[i];
  return w;
}

// y[b][row] = sum_k x[b][k] * w[row][k] in double; x is batch x k, w n x k, y batch x n.
inline std::vector<double> gemv(const Shape& s, std::span<const double> x, std::span<const double> w) {
  std::vector<double> y(static_cast<std::size_t>(s.batch) * s.n);
  for (int b = 0; b < s.batch; ++b) {
    for (int row = 0; row < s.n; ++row) {
      const double* xr = x.data() + static_cast<std::size_t>(b) * s.k;
      const double* wr = w.data() + static_cast<std::size_t>(row) * s.k;
      double sum = 0;
      for (int i = 0; i < s.k; ++i) sum += xr[i] * wr[i];
      y[static_cast<std::size_t>(b) * s.n + row] = sum;
    }
  }
  return y;
}

// The quantized output's error against the bf16 weights' output, both exact (before any rounding to
// bf16), relative to the rms of the bf16 output: max_rel = max |y_q - y_16| / rms(y_16), rms_rel =
// rms(y_q - y_16) / rms(y_16). The rms normalization keeps outputs near zero from inflating the numbers.
struct QuantError {
  double max_rel = 0;
  double rms_rel = 0;
};

inline QuantError quant_error(std::span<const double> y_quantized, std::span<const double> y_bf16) {
  double worst = 0, err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < y_bf16.size(); ++i) {
    const double e = y_quantized[i] - y_bf16[i];
    worst = std::max(worst, std::fabs(e));
    err2 += e * e;
    ref2 += y_bf16[i] * y_bf16[i];
  }
  if (ref2 == 0) return {};
  const double ref_rms = std::sqrt(ref2 / static_cast<double>(y_bf16.size()));
  return {worst / ref_rms, std::sqrt(err2 / static_cast<double>(y_bf16.size())) / ref_rms};
}

// The absolute tolerance for the fp32 accumulation over k, for x and w in [-1, 1) (the problem's inputs;
// dequantized weights stay within their block's amax, so within [-1, 1] too).
// A dot product of k such terms has a typical size sqrt(k / 9) (21 at k = 4096). Every step sums in fp32
// in its own order (32 lane partials and a shuffle tree; with or without the scale factored out of a
// row's or group's sum), and each addition rounds by at most half an fp32 ulp of the running sum. The
// worst order, one running sum over all of k, has an error of typical size 2^-24 * k / sqrt(54) (a random
// walk of k roundings, each of a sum of typical size sqrt(i / 9)): 3e-5 at k = 4096. atol = 16 * k *
// 2^-24 is ~130x that (3.9e-3 at k = 4096, 0.014 at k = 14336), cpu_test_weight_only_gemv.cpp checks it
// against that worst order, and it is still ~2e-4 of a typical |y|: far below a wrong element's error.
// The bf16 rounding of the output is the relative part (problem.hpp: rtol = 2^-7).
inline double gemv_atol(int k) { return 16.0 * k * 0x1p-24; }

}  // namespace aisp::ch19::weight_only_gemv
