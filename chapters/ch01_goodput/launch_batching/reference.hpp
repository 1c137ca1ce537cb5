// ch01:launch_batching — the host reference, the tolerance and the stacking rule of the batched GEMM
// ladder. Plain C++ (no CUDA headers) so that the CPU tests can check all three; problem.hpp uses them.
//
// The problem: C_i = A_i B for i = 0 .. batch-1, every matrix row-major, A_i (m x k) and B (k x n) bf16,
// C_i (m x n) fp32, one B shared by every product.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace aisp::ch01::launch_batching {

// Where the batch lives: A_i starts at element i * stride_a of A, C_i at i * stride_c of C, B_i at
// i * stride_b of B (stride_b = 0: one B for all). Leading dimensions are the row lengths (lda = k,
// ldc = n): the matrices are dense.
struct BatchLayout {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// When the batch may be computed as ONE GEMM of a (batch * m) x k matrix by B (step 03):
//  - every product uses the same B (stride_b == 0): [A_0; A_1; ...] B = [A_0 B; A_1 B; ...] is only true
//    for a shared right-hand side; distinct B_i make the batch block-diagonal, which one GEMM cannot
//    express without computing (and throwing away) the off-diagonal blocks;
//  - the A_i are stacked rows of one matrix: A_{i+1} starts right after the m rows of A_i
//    (stride_a == m * k with lda == k). A gap or an overlap between them breaks the tall matrix's
//    constant row stride;
//  - the C_i are stacked the same way (stride_c == m * n with ldc == n), so the tall result lands where
//    each C_i must be.
// (The mirror image also works: a shared LEFT operand A and stacked B_i side by side as columns; with
// row-major storage those columns are not contiguous, so this ladder does not use it.) Everything else
// (different B per item, padded or scattered items, different shapes per item) needs a batched call.
inline bool can_stack_into_one_gemm(const BatchLayout& l) {
  return l.stride_b == 0 && l.stride_a == l.m * l.k && l.stride_c == l.m * l.n;
}

// The layout this ladder's problem allocates: stacked, dense, one shared B.
inline BatchLayout problem_layout(std::int64_t m, std::int64_t n, std::int64_t k) {
  return {m, n, k, m * k, 0, m * n};
}

// C_i = A_i B in double for every item (inputs as doubles: bf16 values are exact in double). Row-major.
inline std::vector<double> batched_gemm_reference(const std::vector<double>& a, const std::vector<double>& b,
                                                  std::int64_t batch, std::int64_t m, std::int64_t n,
                                                  std::int64_t k) {
  std::vector<double> c(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t i = 0; i < batch; ++i) {
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t col = 0; col < n; ++col) {
        double s = 0;
        for (std::int64_t j = 0; j < k; ++j) s += a[(i * m + r) * k + j] * b[j * n + col];
        c[(i * m + r) * n + col] = s;
      }
    }
  }
  return c;
}

// fp32's unit roundoff u = 2^-24.
inline constexpr double k_fp32_unit_roundoff = 1.0 / 16777216.0;

// gamma_k = k u / (1 - k u): the classic bound on the relative error of a k-term fp32 dot product in
// any order (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1).
inline double gamma_fp32(std::int64_t k) {
  const double ku = static_cast<double>(k) * k_fp32_unit_roundoff;
  return ku / (1.0 - ku);
}

// The absolute tolerance of one C element: |c - exact| <= gamma_k * sum_j |a_j b_j| for fp32
// accumulation in any order, and bf16 x bf16 products are exact in fp32 (8 + 8 significant bits < 24),
// so the only error is the accumulation's. With inputs bounded by `amax`, sum_j |a_j b_j| <= k amax^2.
// Tensor cores are not documented to round to nearest inside their accumulation (studies of earlier
// generations found truncation, up to 2u per addition), hence a factor 2 for that and 2 more of margin:
// atol = 4 gamma_k k amax^2. At k = 64, amax = 1: ~1e-3 against outputs of typical size ~2.7 (a
// k-term sum of products of uniforms in [-1, 1] has standard deviation sqrt(k) / 3); one dropped or
// doubled product (~0.25 on average) is hundreds of times larger.
inline double element_atol(std::int64_t k, double amax) {
  return 4.0 * gamma_fp32(k) * static_cast<double>(k) * amax * amax;
}

// Rounds a float to the nearest bf16 (ties to even) and returns it as a float: what the device's
// inputs hold. Host-side, for the CPU tests. NaN and infinity are not expected here.
inline float round_to_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  bits &= 0xffff0000u;
  float out = 0;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace aisp::ch01::launch_batching
