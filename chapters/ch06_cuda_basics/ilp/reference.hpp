// ch06:ilp — the host reference: each element runs its own chain of `iters` dependent FMAs,
// v <- fma(v, a, b), starting from its input. Plain C++ (no CUDA): tested by cpu_test_ilp.cpp, used by
// problem.hpp's host check, and the constants a and b are shared with the device code.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch06::ilp {

// a = 1 - 2^-11, b = 2^-11: v converges to the fixed point 1 at the rate a^iters (e^-4 after 8192 steps),
// so values stay in [-1, 1], never overflow or go subnormal, and still depend on the input.
inline constexpr float k_a = 1.0f - 1.0f / 2048.0f;
inline constexpr float k_b = 1.0f / 2048.0f;

// One fused multiply-add per step, rounded once, exactly like the GPU's FFMA (std::fma on floats is the
// IEEE 754 fusedMultiplyAdd): the host and device chains agree bit for bit.
inline float chain(float v, long long iters, float a = k_a, float b = k_b) {
  for (long long i = 0; i < iters; ++i) v = std::fma(v, a, b);
  return v;
}

inline std::vector<double> chains(const std::vector<double>& x, long long iters) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = chain(static_cast<float>(x[i]), iters);
  return y;
}

}  // namespace aisp::ch06::ilp
