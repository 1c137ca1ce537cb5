// ch04 — the absolute tolerance of an fp32 sum of R inputs in [-1, 1) added in an order the reference
// does not know (NCCL's ring or tree, a hand-written schedule). Host-only. The same bound as
// ch04:allreduce's allreduce_atol (reference.hpp there), derived once more:
//
// every partial sum is below 2^k in magnitude, k = ceil(log2 R), so one addition rounds by at most half
// an ulp there, 2^(k-25); R - 1 additions per order, and two orders differ by at most both bounds:
// (R - 1) 2^(k-24). Two terms add in either order to the same float (addition commutes).
#pragma once

#include <cmath>

namespace aisp::ch04 {

inline double fp32_sum_atol(int terms) {
  if (terms <= 1) return 0.0;
  const int k = static_cast<int>(std::ceil(std::log2(static_cast<double>(terms))));
  return (terms - 1) * std::ldexp(1.0, k - 24);
}

}  // namespace aisp::ch04
