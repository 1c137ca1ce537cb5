// ch04 — for the CPU tests of the ladders' sum tolerances: the largest gap between adding R fp32 terms
// forward and backward, over `samples` random draws uniform in [-bound, bound). Two orders that far apart
// are what the tolerances (sum_tolerance.hpp, and the ladders' own on top of it) must cover. Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace aisp::ch04 {

inline double worst_sum_order_gap(int ranks, float bound, int samples = 20000, unsigned seed = 42) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-bound, bound);
  double worst = 0;
  std::vector<float> v(ranks);
  for (int i = 0; i < samples; ++i) {
    for (auto& x : v) x = u(rng);
    float forward = 0, backward = 0;
    for (int r = 0; r < ranks; ++r) forward += v[r];
    for (int r = ranks - 1; r >= 0; --r) backward += v[r];
    worst = std::max(worst, static_cast<double>(std::abs(forward - backward)));
  }
  return worst;
}

}  // namespace aisp::ch04
