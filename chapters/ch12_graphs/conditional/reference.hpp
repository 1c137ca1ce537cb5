// ch12:conditional — the iteration, its convergence test and the host reference. Plain C++ (no CUDA
// headers) so that the CPU test can check them; problem.hpp and the kernels use the same definitions.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace aisp::ch12::conditional {

// Each element solves x = c / (1 + x) (the positive root of x^2 + x - c = 0) by fixed-point iteration
// from x = 0: a stand-in for any iterative solver with a convergence test (Jacobi, power iteration). The
// map contracts with rate x* / (1 + x*) at its root, so elements with large c converge slowly: c up to
// 380 puts the root near 19 and the rate near 0.95, a few hundred iterations for the whole array.
inline constexpr double k_c_lo = 1.0, k_c_hi = 380.0;

// An element has converged when one iteration moved it by at most this much relative to its new value.
// Far above fp32's rounding noise near the root (a contraction of rate r keeps the rounding error
// within ~1 ulp / (1 - r), ~20 ulps ~ 1.2e-6 relative at r = 0.95), so the test cannot cycle forever.
inline constexpr float k_rel_tol = 1e-5f;

// One iteration of one element, in fp32. Only an add and an IEEE division (no fused operation that
// could be contracted differently), so the host and every kernel produce the same bits.
inline float iterate(float c, float x) { return c / (1.0f + x); }

// Whether that iteration left the element still moving: |next - x| > tol * |next|.
inline bool still_moving(float x, float next) { return std::fabs(next - x) > k_rel_tol * std::fabs(next); }

struct Solution {
  std::vector<float> x;
  std::int32_t iterations = 0;
};

// The loop every variant runs: x = 0; repeat { one iteration of every element } while some element is
// still moving and fewer than max_iters iterations were done. Elements that converged early keep
// iterating with the rest (the loop is over the array, as on the GPU).
inline Solution solve_reference(const std::vector<float>& c, std::int32_t max_iters) {
  Solution s;
  s.x.assign(c.size(), 0.0f);
  bool moving = true;
  while (moving && s.iterations < max_iters) {
    moving = false;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const float next = iterate(c[i], s.x[i]);
      moving = moving || still_moving(s.x[i], next);
      s.x[i] = next;
    }
    ++s.iterations;
  }
  return s;
}

}  // namespace aisp::ch12::conditional
