// What the ch08 steps that keep a whole row in registers share (softmax:05_registers,
// layernorm:04_registers, rmsnorm:04_registers): how many 16-byte vectors (8 bf16 each) every thread of a
// one-row block holds. The steps instantiate their kernel for 1, 2, 4 and 8 vectors; a longer row would
// need more registers than they allow, and is refused up front rather than spilled.
#pragma once

#include <string>

#include "core/base/error.hpp"

namespace aisp::ch08 {

// The fewest instantiated vectors per thread that hold `cols` bf16 values with `threads` threads.
// Throws UsageError naming `variant` when no instantiation does.
inline int row_vectors_per_thread(int cols, int threads, const std::string& variant) {
  const int need = (cols / 8 + threads - 1) / threads;
  for (int k : {1, 2, 4, 8}) {
    if (need <= k) return k;
  }
  throw UsageError(variant + " keeps a row in registers: at most " + std::to_string(8 * 8 * threads) +
                   " cols, got " + std::to_string(cols));
}

}  // namespace aisp::ch08
