// ch10:hgemm — the GEMM sizes the `size` and `shape` axes select. Plain C++ (no CUDA headers), so that the
// CPU tests check them (cpu_test_hgemm.cpp).
//
// Shape 0 is the square GEMM the ladder was written for, M = N = K = size. Shapes 1-3 are the GEMMs of the
// MLP of a Llama layer whose hidden size is `size` and intermediate size 3.5 x size (Llama-3-8B: 4096 and
// 14336), each a Linear layer's y = x * W^T with M = tokens:
//   1: gate/up projection over `size` tokens: M = size, N = 3.5 size, K = size  (4096 x 14336 x 4096)
//   2: down projection:                       M = size, N = size,     K = 3.5 size (4096 x 4096 x 14336)
//   3: decode-like, tall and skinny:          M = 256,  N = 3.5 size, K = size  (256 x 14336 x 4096)
// Shape 3 has 256 rows, not the 128 or fewer of a real decode batch: every step tiles M by 256 without tails
// (k_size_multiple, two 128-row tiles for steps 07-08's clusters); the serving engine (serving/gpu/gemm.cpp)
// runs cuBLASLt below that. At size 4096 it does 237 FLOPs per byte moved, near the ridge point of an H100 or
// H200 (roughly 300 and 200 FLOP/byte by their specs): the weight matrix's bytes, not only the tensor cores,
// bound it.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/error.hpp"

namespace aisp::ch10::hgemm {

// Every step may tile by 256 in M, N and K without tails: the ladder is about the main loop.
constexpr int k_size_multiple = 256;
constexpr std::int64_t k_max_size = 32768;

constexpr std::int64_t k_decode_rows = 256;  // M of shape 3 (the smallest M every step tiles without tails)
constexpr std::int64_t k_shape_count = 4;

// The shapes in one line, for the axis' help and the errors.
inline constexpr const char* k_shapes_text =
    "0 square M = N = K = size; Llama MLP of hidden size `size`, intermediate 3.5 x size: 1 gate/up "
    "M = size, N = 3.5 size, K = size; 2 down M = N = size, K = 3.5 size; 3 decode-like M = 256 "
    "(every step tiles by 256 without tails; the serving engine uses cuBLASLt below that), N = 3.5 size, "
    "K = size";

struct GemmShape {
  int m = 0, n = 0, k = 0;
};

// M, N and K of `shape` at `size`; UsageError for an unknown shape, or a size whose dimensions some step
// would have to tile with tails.
inline GemmShape gemm_shape(std::int64_t size, std::int64_t shape) {
  if (shape < 0 || shape >= k_shape_count) {
    throw UsageError("ch10:hgemm: unknown shape " + std::to_string(shape) + "; the shapes: " + k_shapes_text);
  }
  if (size % k_size_multiple != 0 || size < k_size_multiple || size > k_max_size) {
    throw UsageError("ch10:hgemm: size must be a multiple of " + std::to_string(k_size_multiple) + " up to " +
                     std::to_string(k_max_size) + " (every step tiles without tails), got " + std::to_string(size));
  }
  // 3.5 x size is a multiple of 256 exactly when size is a multiple of 512 (7 is odd).
  if (shape != 0 && size % (2 * k_size_multiple) != 0) {
    throw UsageError("ch10:hgemm: shape " + std::to_string(shape) + " needs size a multiple of " +
                     std::to_string(2 * k_size_multiple) + " (3.5 x size must be a multiple of " +
                     std::to_string(k_size_multiple) + "), got " + std::to_string(size));
  }
  const int s = static_cast<int>(size), wide = static_cast<int>(size / 2 * 7);
  switch (shape) {
    case 1: return {s, wide, s};
    case 2: return {s, s, wide};
    case 3: return {static_cast<int>(k_decode_rows), wide, s};
    default: return {s, s, s};
  }
}

}  // namespace aisp::ch10::hgemm
