// ch07:reduction — the host reference and the tolerance of the sum ladder. Plain C++ (no CUDA headers) so
// that the CPU tests can check both; problem.hpp uses them.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch07::reduction {

// The sum of `x` in double with Neumaier's compensation: exact to about one double rounding whatever the
// order or the cancellation, so that it can judge fp32 sums.
template <class T>
double sum_reference(const std::vector<T>& x) {
  double sum = 0, compensation = 0;
  for (const T value : x) {
    const double v = static_cast<double>(value);
    const double t = sum + v;
    // Whichever of sum and v is larger in magnitude kept its low bits; recover the ones the other lost.
    compensation += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  return sum + compensation;
}

// fp32's unit roundoff u = 2^-24: round-to-nearest puts fl(a + b) within u * |a + b| of a + b.
inline constexpr double k_fp32_unit_roundoff = 1.0 / 16777216.0;

// The root mean square of the inputs the problem generates: uniform in [-1, 1) has rms 1 / sqrt(3).
inline double uniform_rms() { return 1.0 / std::sqrt(3.0); }

// The absolute tolerance of an fp32 sum of n values of root mean square `rms` and mean ~0, computed in any
// order: atol = 3 * u * n * rms.
//
// Why not a worst-case bound: every order's error is sum_k delta_k * S_k, the rounding errors delta_k
// (|delta_k| <= u) times the partial sums S_k. The classic bounds, gamma_{n-1} * sum |x_i| ~ n^2 u / 2
// or n * u * max |S_k|, assume every rounding goes the same way; at n = 2^28 they are larger than the sum
// itself (~10^4) and would pass a wrong answer. Round-to-nearest errors are unbiased and close to
// independent, so the error behaves like a random walk (Higham & Mary, "A New Approach to Probabilistic
// Rounding Error Analysis", SIAM J. Sci. Comput. 41(5), 2019): with probability >= 1 - 2 exp(-l^2 / 2)
// it is below l * u * sqrt(sum_k S_k^2). The worst order the ladder runs is one running fp32 sum (step
// 01: every element added to one address), whose partial sums are a random walk, sum_k S_k^2 ~ n^2 rms^2
// / 2; each rounding error has a standard deviation of ~0.4 u |S_k|, so the error's standard deviation is
// ~0.3 u n rms. A CPU simulation (cpu_test_reduction.cpp) measures ~0.2-0.3 u n rms, the worst of
// hundreds of seeds ~1.1 u n rms. 3 u n rms is ten standard deviations: a false FAIL is improbable,
// and at the default n = 2^28 the tolerance (~28) is 0.3% of the sum's typical size (sqrt(n) rms ~ 9,500).
// Every other step sums short runs and adds them in a tree or through a few thousand atomics; their
// errors are orders of magnitude smaller.
inline double sum_atol(std::size_t n, double rms) {
  return 3.0 * k_fp32_unit_roundoff * static_cast<double>(n) * rms;
}

}  // namespace aisp::ch07::reduction
