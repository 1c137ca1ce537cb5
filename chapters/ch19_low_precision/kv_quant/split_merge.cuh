// ch19:kv_quant — what every split-KV step shares: how a sequence's context is cut into splits, the
// partial results' scratch, and the kernel that merges them.
#pragma once

#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"
#include "chapters/ch19_low_precision/kv_quant/problem.hpp"

namespace aisp::ch19::kv_quant {

// Splits are cut at multiples of this many tokens (and hold at least one such unit, the last one
// whatever is left): a split is then at least a full round of tiles for the block's four warps.
constexpr int k_split_unit = 64;

// A split's partial result per (sequence, query head), unnormalized: the max m of its scores (log2
// domain), l = sum 2^(s - m), and acc = sum 2^(s - m) v (head_dim values). Laid out [batch * heads]
// [splits], x head_dim for acc, so that partial (pair, split) is at pair * splits + split.
struct Partials {
  float* m;
  float* l;
  float* acc;
};

// The split plan and the partials' scratch of one run, made in a step's setup (outside timing): they
// depend only on the shape, the kernel's occupancy and the device. The plan is ch16:paged_attention's
// (split_plan.hpp; its "pages" are 64-token units here): the fewest splits whose waves of blocks are at
// least 90% full, one block per (sequence, KV head, split).
class SplitScratch {
 public:
  void make(const Args& a, int blocks_per_sm) {
    const int units = (a.context + k_split_unit - 1) / k_split_unit;
    const auto plan =
        ch16::paged_attention::plan_splits(a.batch * k_kv_heads, units, a.sm_count * blocks_per_sm, 1);
    m_splits = plan.splits;
    m_tokens_per_split = plan.pages_per_split * k_split_unit;
    const std::size_t n = static_cast<std::size_t>(a.batch) * k_heads * m_splits;
    m_m = DeviceBuffer<float>(n);
    m_l = DeviceBuffer<float>(n);
    m_acc = DeviceBuffer<float>(n * k_head_dim);
  }
  int splits() const { return m_splits; }
  int tokens_per_split() const { return m_tokens_per_split; }
  Partials partials() const { return {m_m.data(), m_l.data(), m_acc.data()}; }
  std::vector<Fact> facts() const {
    return {{"splits", std::to_string(m_splits)}, {"tokens_per_split", std::to_string(m_tokens_per_split)}};
  }

 private:
  int m_splits = 1;
  int m_tokens_per_split = k_split_unit;
  DeviceBuffer<float> m_m, m_l, m_acc;
};

// One block per (sequence, query head), one thread per output value: the splits' partials rescaled to
// their common max M and added, out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M). Every split holds
// at least one token, so every m_s is finite and no 2^(-inf - -inf) = NaN can arise. (A template, D =
// head_dim, so that the header defines it in every step's file without a duplicate symbol.)
template <int D>
__global__ void __launch_bounds__(D)
    merge_splits_kernel(const Args a, const Partials part, int splits) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * splits;
  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, part.m[base + s]);
  float l = 0.0f, o = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float f = exp2f(part.m[base + s] - m);
    l += part.l[base + s] * f;
    o += part.acc[(base + s) * D + threadIdx.x] * f;
  }
  a.out[static_cast<std::int64_t>(blockIdx.x) * D + threadIdx.x] = __float2bfloat16(o / l);
}

inline void launch_merge(const Args& a, const SplitScratch& scratch, cudaStream_t stream) {
  merge_splits_kernel<k_head_dim><<<a.batch * k_heads, k_head_dim, 0, stream>>>(
      a, scratch.partials(), scratch.splits());
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch19::kv_quant
