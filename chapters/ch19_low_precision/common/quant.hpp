// ch19 — the quantization arithmetic every low-precision ladder of the chapter shares, on the host: FP8
// e4m3 encoding and decoding, the scale that maps a block's absolute maximum onto a format's range, and
// the symmetric integer (int8, int4) quantizers of weight-only GEMV.
//
// Plain C++ (no CUDA headers): the CPU tests check it against hand-computed values, and each ladder's
// host reference uses it to check its device reference at the test size. The device side converts with
// the intrinsics of cuda_fp8.h (__nv_cvt_float_to_fp8 with __NV_SATFINITE), which round to nearest even
// and saturate exactly as e4m3_encode does here.
//
// e4m3 (OCP 8-bit floating point, "E4M3"; PTX ISA "Floating Point Data Types: .e4m3"): 1 sign bit, 4
// exponent bits with bias 7, 3 mantissa bits. It has no infinities, one NaN per sign (S.1111.111), a
// largest finite value of 1.75 * 2^8 = 448, normals down to 2^-6 and subnormals m * 2^-9, m = 1..7.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace aisp::ch19 {

constexpr float k_e4m3_max = 448.0f;       // 0x7E: 1.110b * 2^8
constexpr std::uint8_t k_e4m3_nan = 0x7F;  // S.1111.111 (0xFF with the sign)

// The value of an e4m3 code.
inline float e4m3_decode(std::uint8_t code) {
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  const float sign = (code & 0x80) != 0 ? -1.0f : 1.0f;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-9
  return sign * std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
}

// The nearest e4m3 code to x, ties to the even code; magnitudes beyond 448 (infinities included)
// saturate to +-448 and NaN stays NaN: cuda_fp8.h's __NV_SATFINITE behaviour (checked against
// __nv_cvt_float_to_fp8 on every 37th float bit pattern: identical). (Without saturation the
// format would have nowhere to put them: e4m3 has no infinity.)
inline std::uint8_t e4m3_encode(float x) {
  if (std::isnan(x)) return k_e4m3_nan;  // cuda_fp8.h returns 0x7F for every NaN, whatever its sign
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= k_e4m3_max) return static_cast<std::uint8_t>(sign | 0x7E);
  // Below 2^-6 the spacing is fixed at 2^-9: the code is the rounded multiple (8 * 2^-9 = 2^-6 is code 8,
  // the smallest normal, so rounding up into the normals needs no special case).
  if (a < 0x1p-6) {
    const double m = std::nearbyint(a * 512.0);  // exact product; nearbyint rounds ties to even
    return static_cast<std::uint8_t>(sign | static_cast<int>(m));
  }
  int e = 0;
  const double f = std::frexp(a, &e);                 // a = f * 2^e, f in [0.5, 1)
  double m = std::nearbyint((2.0 * f - 1.0) * 8.0);   // mantissa of 1.mmm * 2^(e-1), 3 bits, ties to even
  int exponent = e - 1 + 7;
  if (m == 8.0) {  // rounded up to the next power of two
    m = 0.0;
    ++exponent;
  }
  const int code = (exponent << 3) | static_cast<int>(m);
  return static_cast<std::uint8_t>(sign | std::min(code, 0x7E));  // 448 < a < 464 rounds to 448 anyway
}

// Round trip: the value x becomes after FP8 quantization at unit scale.
inline float e4m3_round(float x) { return e4m3_decode(e4m3_encode(x)); }

// The scale that maps a block whose largest magnitude is amax onto the format's largest finite value
// (x is stored as x / scale, recovered as code * scale). An all-zero block gets scale 1: any scale
// represents it exactly, and 1 avoids dividing by zero.
inline float quant_scale(float amax, float format_max) { return amax > 0.0f ? amax / format_max : 1.0f; }

inline float abs_max(std::span<const float> values) {
  float m = 0.0f;
  for (const float v : values) m = std::max(m, std::fabs(v));
  return m;
}

// Symmetric integer quantization to [-q_max, q_max] (127 for int8, 7 for int4): round to nearest, ties
// to even (rintf on the device), then clamp. The clamp matters only for values the scale does not cover
// (a scale computed from a different block, or rounding of amax / scale to q_max + 0.5 in float).
inline int quantize_symmetric(float x, float scale, int q_max) {
  const float q = std::nearbyint(x / scale);
  return static_cast<int>(std::clamp(q, static_cast<float>(-q_max), static_cast<float>(q_max)));
}

// int4 values packed two to a byte, element 2i in the low nibble and 2i + 1 in the high one, each as a
// 4-bit two's complement number in [-8, 7] (this chapter only produces [-7, 7]).
inline std::uint8_t pack_int4(int low, int high) {
  return static_cast<std::uint8_t>((low & 0xF) | ((high & 0xF) << 4));
}
inline int unpack_int4_low(std::uint8_t byte) { return static_cast<int>(static_cast<std::int8_t>(byte << 4) >> 4); }
inline int unpack_int4_high(std::uint8_t byte) { return static_cast<int>(static_cast<std::int8_t>(byte) >> 4); }

}  // namespace aisp::ch19
