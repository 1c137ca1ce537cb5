// ch07:bank_conflicts — host reference: what `passes` transposes of every 32x32 tile in shared memory
// leave in the output. Plain C++ (the CPU tests include it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aisp::ch07::bank_conflicts {

// An odd number of in-tile transposes is one transpose of the whole matrix (each tile's transpose is
// written to the mirrored tile); an even number gives the input back.
inline std::vector<double> tile_passes(const std::vector<double>& in, std::int64_t n, std::int64_t passes) {
  std::vector<double> out(in.size());
  const auto un = static_cast<std::size_t>(n);
  for (std::size_t r = 0; r < un; ++r) {
    for (std::size_t c = 0; c < un; ++c) out[passes % 2 ? c * un + r : r * un + c] = in[r * un + c];
  }
  return out;
}

}  // namespace aisp::ch07::bank_conflicts
