// ch16:paged_attention — the second kernel of the split-KV steps (03, 04): merging the partial softmax
// results that the splits of one (sequence, query head) left in scratch.
#pragma once

#include "chapters/ch16_production_inference/paged_attention/problem.hpp"

namespace aisp::ch16::paged_attention {

// A split's partial result, unnormalized: the max m of its scores (log2 domain), l = sum 2^(s - m), and
// acc = sum 2^(s - m) v (head_dim values). Laid out [batch * heads][splits], x head_dim for acc, so
// that partial (pair, split) is at pair * splits + split.
struct Partials {
  float* m;
  float* l;
  float* acc;
};

// One block per (sequence, query head), one thread per output value: the splits' partials rescaled to
// their common max M and added, out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M). Every split's m
// is finite (each split holds at least one token), so no 2^(-inf - -inf) = NaN can arise.
template <int D>
__global__ void __launch_bounds__(D) merge_splits_kernel(const Args a, const Partials part, int splits) {
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

}  // namespace aisp::ch16::paged_attention
