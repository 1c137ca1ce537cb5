// ch11:priorities — the host reference of the latency-critical chain. Plain C++ (no CUDA headers) so that
// the CPU tests can check it; problem.hpp uses it.
#pragma once

#include <cmath>
#include <vector>

namespace aisp::ch11::priorities {

// One critical step's work per thread: p(x) = 1 + x + ... + x^fmas by Horner's rule, one fma per degree,
// each rounded once (std::fma here, __fmaf_rn on the GPU: the same bits).
inline float horner_geometric(float x, int fmas) {
  float y = 1.0f;
  for (int j = 0; j < fmas; ++j) y = std::fma(y, x, 1.0f);
  return y;
}

// The chain's final state for one thread: the first step writes p(x), each later step adds p(x) to what
// the step before it left, in order (fp32 adds, rounded each time, exactly as the kernels do them).
inline float chain_reference(float x, int steps, int fmas) {
  const float p = horner_geometric(x, fmas);
  float state = p;
  for (int k = 1; k < steps; ++k) state = state + p;
  return state;
}

// chain_reference for every thread's input.
inline std::vector<double> chain_reference(const std::vector<double>& x, int steps, int fmas) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = chain_reference(static_cast<float>(x[i]), steps, fmas);
  return out;
}

}  // namespace aisp::ch11::priorities
