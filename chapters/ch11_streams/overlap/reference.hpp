// ch11:overlap — the host reference of the per-element work and the chunk plan of the pipelined step.
// Plain C++ (no CUDA headers) so that the CPU tests can check both; problem.hpp and the variants use them.
#pragma once

#include <cmath>
#include <cstddef>

namespace aisp::ch11::overlap {

// The work per element: p(x) = 1 + x + x^2 + ... + x^k by Horner's rule, y <- y * x + 1 repeated k times
// from y = 1, one fused multiply-add per degree. fmaf rounds once and exactly (IEEE 754), on the host as
// on the GPU (__fmaf_rn), so the two give the same bits for the same k: the ladder's tolerance is 0.
// Inputs lie in [-1/2, 1/2), where the recurrence contracts (|x| <= 1/2): rounding errors shrink instead
// of growing, and p(x) stays within [2/3, 2].
inline float horner_geometric(float x, int k) {
  float y = 1.0f;
  for (int j = 0; j < k; ++j) y = std::fma(y, x, 1.0f);
  return y;
}

// The same polynomial in closed form, (1 - x^(k+1)) / (1 - x), in double: what the CPU test checks
// horner_geometric against (x != 1).
inline double geometric_closed_form(double x, int k) { return (1.0 - std::pow(x, k + 1)) / (1.0 - x); }

// One chunk of the pipelined step: elements [begin, begin + count).
struct ChunkRange {
  std::size_t begin = 0;
  std::size_t count = 0;
};

// Chunk c of n elements cut into `chunks` pieces of ceil(n / chunks) elements, the last one shorter; chunks
// past the end (when chunks > n) are empty. Every element lies in exactly one chunk.
inline ChunkRange chunk_range(std::size_t n, int chunks, int c) {
  const std::size_t parts = static_cast<std::size_t>(chunks);
  const std::size_t size = (n + parts - 1) / parts;
  const std::size_t begin = static_cast<std::size_t>(c) * size;
  if (begin >= n) return {n, 0};
  return {begin, n - begin < size ? n - begin : size};
}

}  // namespace aisp::ch11::overlap
