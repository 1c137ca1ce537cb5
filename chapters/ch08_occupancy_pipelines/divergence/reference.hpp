// ch08:divergence — the function every step computes, in plain C++ (the CPU reference and its tests).
//
// y = p(x), a polynomial of `terms` coefficients evaluated by Horner's rule, whose coefficients follow
// the recurrence c <- c * r + s. Which recurrence depends on the sign of x: the data-dependent branch of
// the ladder. Every step must do exactly these fused multiply-adds in this order, so the outputs agree
// bit for bit (fmaf rounds once, on the host as on the GPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace aisp::ch08::divergence {

// The two coefficient recurrences: (c0, r, s). Both converge (|r| < 1), so y stays bounded for |x| < 1.
struct Coefficients {
  float c0, r, s;
};
// Functions rather than constexpr variables: device code may call them (nvcc --expt-relaxed-constexpr),
// while a namespace-scope constexpr object of class type is not usable there.
constexpr Coefficients non_negative_coefficients() { return {1.0f, 0.5f, 0.25f}; }
constexpr Coefficients negative_coefficients() { return {-1.0f, 0.75f, 0.125f}; }

inline float horner(float x, Coefficients k, std::int64_t terms) {
  float y = 0.0f, c = k.c0;
  for (std::int64_t i = 0; i < terms; ++i) {
    y = std::fma(y, x, c);
    c = std::fma(c, k.r, k.s);
  }
  return y;
}

inline float branchy_function(float x, std::int64_t terms) {
  return horner(x, x >= 0.0f ? non_negative_coefficients() : negative_coefficients(), terms);
}

inline std::vector<double> evaluate(const std::vector<double>& x, std::int64_t terms) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = branchy_function(static_cast<float>(x[i]), terms);
  return y;
}

}  // namespace aisp::ch08::divergence
