// ch12:dynamic_parallelism — the per-cell decision, the integrand, the host reference and the tolerance
// of the adaptive-sampling ladder. Plain C++ (no CUDA headers) so that the CPU test can check them;
// problem.hpp and the kernels use the same definitions: the constexpr ones directly, the others written
// out in the kernels with the same operations.
#pragma once

#include <cmath>
#include <cstdint>

namespace aisp::ch12::dynamic_parallelism {

// The workload: adaptive sampling. Each of `cells` cells holds a peak h(x) = 1 / (1 + s x^2) on
// x in [0, 1), with sharpness s = 4^r set by the cell's input r in [0, k_levels): the peak's width
// 1/sqrt(s) = 2^-r halves with every unit of r. A parent kernel looks at r and decides how finely to
// sample the cell: level = floor(r), n = k_base_samples * 2^level samples, so every cell gets the same
// samples per peak width (from 1,024 to 1,048,576 samples: a 1,024x spread). A child grid then
// evaluates the cell's midpoint rule, out = (1/n) sum_j h((j + 1/2) / n). It stands in for any
// refinement decided on the device: adaptive quadrature or mesh refinement, Mariani-Silver fractals,
// per-node work in graph traversal, per-expert token counts in a mixture-of-experts layer.
inline constexpr int k_levels = 11;                  // level 0..10
inline constexpr std::int32_t k_base_samples = 1024;  // one child block's worth
inline constexpr int k_child_threads = 256;
inline constexpr int k_samples_per_thread = 4;
static_assert(k_child_threads * k_samples_per_thread == k_base_samples, "a child block covers k_base_samples");

// The parent's decision: exact integer arithmetic, so the host, the reference and every kernel agree.
constexpr int level_of(float r) {
  const int level = static_cast<int>(r);  // r >= 0: truncation is floor
  return level < 0 ? 0 : (level >= k_levels ? k_levels - 1 : level);
}
constexpr std::int32_t samples_of(float r) { return k_base_samples << level_of(r); }
constexpr std::int32_t k_max_samples = k_base_samples << (k_levels - 1);

// The integrand, in fp32 with one fused multiply-add (written out, so that no compiler contracts it
// differently): 1 / fma(s * x, x, 1). Positive, in (0, 1].
inline float integrand(float s, float x) { return 1.0f / std::fma(s * x, x, 1.0f); }

// Sample j's abscissa: (j + 1/2) / n, exact in fp32 (j < 2^23, n a power of two).
inline float abscissa(std::int32_t j, std::int32_t n) {
  return (static_cast<float>(j) + 0.5f) * (1.0f / static_cast<float>(n));
}

// The host reference of one cell: the fp32 samples summed in double, times 1/n. `s` is the cell's
// sharpness as the device computes it (exp2f(2 r); the host's exp2 may differ from it by an ulp or two,
// which moves the result by less than 1e-6 relative).
inline double cell_reference(float s, std::int32_t n) {
  double sum = 0;
  for (std::int32_t j = 0; j < n; ++j) sum += static_cast<double>(integrand(s, abscissa(j, n)));
  return sum / static_cast<double>(n);
}

// The exact integral of h over [0, 1): atan(sqrt(s)) / sqrt(s). The midpoint rule with n samples is
// within ~ max|h''| / (24 n^2) of it; n grows with the sharpness, so the relative error stays small.
inline double cell_integral(double s) { return std::atan(std::sqrt(s)) / std::sqrt(s); }

// The kernels' summation order, which both steps share: each thread adds its 4 samples (3 adds), a warp
// butterfly (5), thread 0 adds the 8 warp sums (7), and the child's 2^level blocks each add their
// scaled sum into out with atomicAdd in whatever order they finish (up to 1,024 adds; the scaling by
// 1/n, a power of two, is exact).
inline constexpr int k_serial_adds = 3 + 5 + 7 + (1 << (k_levels - 1));

// Relative tolerance. Every sample is positive, so any order of fp32 additions obeys |computed - exact|
// <= gamma_k * exact, gamma_k = k u / (1 - k u), u = 2^-24, k the longest chain of additions (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 4.2); the reference is the double
// sum rounded to float (within u). rtol = gamma_{k+2} ~ 6.2e-5: a worst case, far above the typical
// error, far below what a missing child block near the peak, a wrong sample count or an unwritten cell
// (NaN) gives.
inline double relative_tolerance() {
  const double ku = (k_serial_adds + 2) * 0x1.0p-24;
  return ku / (1.0 - ku);
}

}  // namespace aisp::ch12::dynamic_parallelism
