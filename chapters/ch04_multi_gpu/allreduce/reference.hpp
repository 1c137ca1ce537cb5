// ch04:allreduce — the host reference and the tolerance. Host-only: the CPU tests and
// check_reference_on_host use it; the device reference (device_reference.cu) sums in the same order.
#pragma once

#include <cstddef>
#include <vector>

#include "chapters/ch04_multi_gpu/common/sum_tolerance.hpp"

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
// steps do not add in rank order): common/sum_tolerance.hpp derives it.
inline double allreduce_atol(int ranks) { return fp32_sum_atol(ranks); }

}  // namespace aisp::ch04::allreduce
