// ch10:cluster_reduction — the host reference, the geometry every step shares, and the tolerance with its
// derivation. Plain C++ (no CUDA headers) so that the CPU tests can check all three; problem.hpp uses them.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch10::cluster_reduction {

// Every step's block: 256 threads (8 warps). Each block sums one tile of k_block_threads *
// items_per_thread consecutive elements; the tolerance below depends on that order.
inline constexpr int k_block_threads = 256;
// Blocks per cluster in step 02: the portable maximum (CUDA programming guide, "Thread Block Clusters":
// 8 is guaranteed, larger sizes need cudaFuncAttributeNonPortableClusterSizeAllowed).
inline constexpr int k_cluster_blocks = 8;

// The values of the items_per_thread axis that the steps are compiled for.
inline bool supported_items_per_thread(long long items) {
  return items == 4 || items == 8 || items == 16 || items == 32 || items == 64;
}

inline std::size_t tile_elems(int items_per_thread) {
  return static_cast<std::size_t>(k_block_threads) * static_cast<std::size_t>(items_per_thread);
}

// Blocks of the launch: one per tile, the last one partial. Also the number of atomics of step 01.
inline std::size_t tile_count(std::size_t n, int items_per_thread) {
  const std::size_t tile = tile_elems(items_per_thread);
  return (n + tile - 1) / tile;
}

// The sum of `x` in double with Neumaier's compensation: exact to about one double rounding whatever the
// order or the cancellation, so that it can judge fp32 sums.
template <class T>
double sum_reference(const std::vector<T>& x) {
  double sum = 0, compensation = 0;
  for (const T value : x) {
    const double v = static_cast<double>(value);
    const double t = sum + v;
    // Whichever of sum and v is larger in magnitude kept its low bits; recover the ones the other lost.
    compensation += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  return sum + compensation;
}

// fp32's unit roundoff u = 2^-24.
inline constexpr double k_fp32_unit_roundoff = 1.0 / 16777216.0;

// The root mean square of the inputs the problem generates: uniform in [-1, 1) has rms 1 / sqrt(3).
inline double uniform_rms() { return 1.0 / std::sqrt(3.0); }

// The tolerance of an fp32 sum in the orders this ladder runs, for n inputs of mean ~0 and root mean
// square `rms`.
//
// Model. Each fp32 addition returns (a + b) + e with |e| <= half an ulp of the result; with the result's
// significand spread over its binade, e has a standard deviation of at most u |S| / sqrt(3), S the
// result (the ulp is at most 2u|S|, and a uniform error in +-ulp/2 has deviation ulp / sqrt(12)). The
// errors are unbiased and close to independent (Higham & Mary, "A New Approach to Probabilistic Rounding
// Error Analysis", SIAM J. Sci. Comput. 41(5), 2019), so the sum's error has a variance of at most
// u^2 / 3 * sum over all additions of S^2. An addition whose result covers c inputs has E[S^2] = c rms^2,
// so that is u^2 rms^2 / 3 * W, W the sum over all additions of the number of inputs they cover: the
// "weight" of the order.
//
// The weight of the ladder's orders (k = items_per_thread, P = tiles):
//   - per float4, (x + y) + (z + w): 2 + 2 + 4 = 8 per 4 inputs:                        2 n
//   - per thread, a running sum of its k / 4 float4 sums: 4 + 8 + ... + k:             n (k + 4) / 8
//   - the warp's shuffle tree (5 levels), the block's (5 more, over the 8 warps' sums,
//     zeros added exactly), step 02's cluster tree (5 more): each level covers n:         15 n
//   - the atomics: a running fp32 sum of the P tile sums, in any order (the order they
//     reach the L2): partial sums cover n / P, 2 n / P, ..., n:                         n (P + 1) / 2
// Step 01 has P = tiles atomics, step 02 P / 8 (one per cluster), so step 01's P bounds both, and the
// cluster tree is counted for both. The atomics dominate: at n = 2^28, k = 16 the deviation is ~0.06.
//
// atol is ten deviations: a false FAIL needs a 10-sigma rounding event (the random walk of partial sums
// fluctuates from seed to seed, which is why it is ten and not four; cpu_test_cluster_reduction.cpp
// measures the errors of both orders against it). The reference and the variant each round the final
// value once more; rtol = 2^-23 covers that. The classic worst-case bound (gamma_{n-1} * sum |x_i|, or
// ch07:reduction's 3 u n rms, made for a running sum over all n elements) would be hundreds of times
// larger and would accept a dropped tile; this one stays below a tenth of one tile's typical sum
// (sqrt(256 k) rms) at every default sweep point, so a step that loses a tile fails on most seeds.
inline double order_weight(std::size_t n, int items_per_thread) {
  const double nd = static_cast<double>(n);
  const double k = items_per_thread;
  const double tiles = static_cast<double>(tile_count(n, items_per_thread));
  return nd * (2.0 + (k + 4.0) / 8.0 + 15.0 + (tiles + 1.0) / 2.0);
}

// One standard deviation of the error, as derived above.
inline double sum_error_sigma(std::size_t n, int items_per_thread, double rms) {
  return k_fp32_unit_roundoff * rms * std::sqrt(order_weight(n, items_per_thread) / 3.0);
}

inline double sum_atol(std::size_t n, int items_per_thread, double rms) {
  return 10.0 * sum_error_sigma(n, items_per_thread, rms);
}

inline constexpr double k_sum_rtol = 2.0 / 16777216.0;  // 2^-23: the final rounding of each side

}  // namespace aisp::ch10::cluster_reduction
