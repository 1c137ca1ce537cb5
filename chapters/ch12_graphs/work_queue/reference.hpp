// ch12:work_queue — the workload, the per-element computation, the host reference and the tolerance of
// the skewed-work ladder. Plain C++ (no CUDA headers) so that the CPU test can check them; problem.hpp
// and the kernels use the same definitions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

namespace aisp::ch12::work_queue {

// The workload: a batch of `items` sequences (documents, long-context requests, rows of a power-law
// sparse matrix) whose lengths follow a truncated Pareto law, P(L > l) ~ l^-alpha between k_min_len and
// k_max_len: most are short, a few are 64 times longer, and those few carry much of the work, as real
// corpora and long-context traffic do. Every element (token) goes through the same fixed computation,
// so an item's cost is proportional to its length; the result is pooled per item (a sum).
inline constexpr std::int32_t k_min_len = 1024;   // one round of a 256-thread block with 4 elements each
inline constexpr std::int32_t k_max_len = 65536;  // a few % of one SM's share at the default size
inline constexpr double k_alpha = 1.2;            // tail exponent: heavy (variance grows with k_max_len)

// The order the items are stored in (axis "order"): as drawn (shuffled), longest first or shortest first,
// as a batch bucketed by length or a graph reordered by degree would store them.
enum class Order : std::int32_t { shuffled = 0, longest_first = 1, shortest_first = 2 };

// The batch's shape is fixed by the axes, not by the run's seed (the data is): every seed then does the
// same work, and the buffers can be sized before the first generate().
inline constexpr std::uint64_t k_shape_seed = 0x5eedc0de12ull;

// splitmix64: a tiny, portable generator (std::uniform_*_distribution is implementation-defined).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Item lengths: inverse CDF of the Pareto law truncated to [k_min_len, k_max_len], then ordered.
inline std::vector<std::int32_t> make_lengths(std::int64_t items, Order order, std::uint64_t seed = k_shape_seed) {
  std::vector<std::int32_t> len(static_cast<std::size_t>(items));
  std::uint64_t state = seed;
  const double lo = k_min_len, hi = k_max_len;
  const double span = 1.0 - std::pow(lo / hi, k_alpha);
  for (auto& l : len) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    const double v = lo / std::pow(1.0 - u * span, 1.0 / k_alpha);
    l = static_cast<std::int32_t>(std::clamp(std::floor(v), lo, hi));
  }
  if (order == Order::longest_first) std::sort(len.begin(), len.end(), std::greater<>());
  if (order == Order::shortest_first) std::sort(len.begin(), len.end());
  return len;
}

// offsets[i] .. offsets[i + 1] are item i's elements; offsets[items] is the total.
inline std::vector<std::int64_t> make_offsets(const std::vector<std::int32_t>& len) {
  std::vector<std::int64_t> off(len.size() + 1, 0);
  std::partial_sum(len.begin(), len.end(), off.begin() + 1,
                   [](std::int64_t a, std::int64_t b) { return a + b; });
  return off;
}

// The per-element computation: a degree-128 polynomial feature f(x) = sum_k x^k / (k + 1) evaluated by
// Horner's rule, 128 fused multiply-adds in fp32 (a stand-in for any fixed per-token cost; 2 x 128 flops
// for 4 bytes read keeps it compute-bound on any GPU). With x in [0, 1) every coefficient and every term
// is positive, so f(x) is in [1, ~5.4] and every sum of them is a sum of positive numbers (see the
// tolerance). fmaf is correctly rounded on the host and the device: both produce the same bits.
inline constexpr int k_degree = 128;

constexpr float coefficient(int k) { return 1.0f / static_cast<float>(k + 1); }

inline float feature_reference(float x) {
  float y = coefficient(k_degree);
  for (int k = k_degree - 1; k >= 0; --k) y = std::fma(y, x, coefficient(k));
  return y;
}

// One item's pooled output, as the trusted reference computes it: the fp32 features summed in double.
inline double item_sum_reference(const float* x, std::int64_t begin, std::int64_t end) {
  double s = 0;
  for (std::int64_t j = begin; j < end; ++j) s += static_cast<double>(feature_reference(x[j]));
  return s;
}

// The kernels' summation order, which both steps share (so their outputs agree bit for bit): a 256-thread
// block per item, thread t adds the features of elements t, t + 256, t + 512, ... into one fp32 sum (at
// most ceil(k_max_len / 256) adds, plus up to 3 zeros of the last round's padding, which are exact), the
// warp adds its 32 sums in a 5-level butterfly, and thread 0 adds the 8 warp sums in order (7 adds).
inline constexpr int k_block_threads = 256;
inline constexpr int k_serial_adds = (k_max_len + k_block_threads - 1) / k_block_threads + 3 + 5 + 7;

// Relative tolerance. Every term is positive, so whatever the order a float sum of them obeys the
// classic bound |computed - exact| <= gamma_k * exact with gamma_k = k u / (1 - k u), u = 2^-24 and k
// the longest chain of additions any term goes through (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., section 4.2): here k_serial_adds = 271. The reference is the double sum rounded
// to float (within u), so |out - ref| <= (gamma_k + u) * |ref| (to first order): rtol = (k + 2) u ~ 1.6e-5.
// Worst case, not typical: a correct kernel stays far inside it, a wrong item (or an unwritten one, NaN)
// is far outside.
inline double relative_tolerance() {
  const double ku = (k_serial_adds + 2) * 0x1.0p-24;
  return ku / (1.0 - ku);
}

}  // namespace aisp::ch12::work_queue
