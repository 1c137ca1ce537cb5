// ch04:allreduce — the host reference and the tolerance. Host-only: the CPU tests and
// check_reference_on_host use it; the device reference (device_reference.cu) sums in the same order.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch04::allreduce {

// out[i] = in[0][i] + in[1][i] + ... + in[R-1][i], added left to right in fp32 (rank order).
inline std::vector<float> host_allreduce(const std::vector<std::vector<float>>& in) {
  if (in.empty()) return {};
  std::vector<float> out = in.front();
  for (std::size_t r = 1; r < in.size(); ++r) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += in[r][i];
  }
  return out;
}

// Absolute tolerance for an fp32 sum of R inputs in [-1, 1) added in any order (NCCL's ring and the
// steps do not add in rank order). Every partial sum is below 2^k in magnitude, k = ceil(log2 R), so one
// addition rounds by at most half an ulp there, 2^(k-25); R - 1 additions per order, and two orders
// differ by at most both bounds: (R - 1) 2^(k-24). Two ranks add in either order to the same float
// (addition commutes), so the gate is exact there in practice.
inline double allreduce_atol(int ranks) {
  if (ranks <= 1) return 0.0;
  const int k = static_cast<int>(std::ceil(std::log2(static_cast<double>(ranks))));
  return (ranks - 1) * std::ldexp(1.0, k - 24);
}

}  // namespace aisp::ch04::allreduce
