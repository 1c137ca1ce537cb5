// ch06:vector_add — the host reference: c[i] = a[i] + b[i] in fp32, as the GPU computes it.
// Plain C++ (no CUDA): tested by cpu_test_vector_add.cpp, used by problem.hpp's host check.
#pragma once

#include <cstddef>
#include <vector>

namespace aisp::ch06::vector_add {

// Values arrive as doubles (device/gate.hpp to_host); each is an fp32 value, and the sum is rounded to
// fp32 exactly as one FADD does (IEEE 754 round to nearest even), so the result is exact, not approximate.
inline std::vector<double> add(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    c[i] = static_cast<double>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
  }
  return c;
}

}  // namespace aisp::ch06::vector_add
