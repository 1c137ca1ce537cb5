// ch08:softmax — the device pieces of the online softmax normalizer (step 03's idea, Milakov &
// Gimelshein 2018), as one header: exp as every step computes it, the (max, sum) pair, its merge and
// per-element update, and its warp and block merges; and the 16-byte view of 8 bf16 that step 04 reads
// rows with. ch08's steps spell out the pieces they teach in their own files; ch10:cluster_softmax (the
// same problem on vocabulary-long rows) calls these instead of copying them a fourth time.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

namespace aisp::ch08::softmax {

// exp(x) as every step computes it: ex2.approx on x * log2(e) (CUDA C++ Programming Guide, "Intrinsic
// Functions": __expf). Its error (a few fp32 ulp for |x| <= 16) is far below one bf16 ulp.
__device__ __forceinline__ float fast_exp(float x) { return __expf(x); }

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

namespace online {

inline constexpr unsigned k_full_mask = 0xffffffffu;

// A partial softmax normalizer: the max of some values and the sum of exp(value - max) over them.
struct MaxSum {
  float m;
  float s;
};

// (m, s) + (m', s') = (M, s e^(m - M) + s' e^(m' - M)), M = max(m, m').
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: -inf - -inf would be NaN
  return {m, a.s * fast_exp(a.m - m) + b.s * fast_exp(b.m - m)};
}

// Adds one value: a new max rescales what was summed so far (exp(-inf) = 0 on the first value).
__device__ __forceinline__ void update(MaxSum& acc, float v) {
  if (v > acc.m) {
    acc.s = acc.s * fast_exp(acc.m - v) + 1.0f;
    acc.m = v;
  } else {
    acc.s += fast_exp(v - acc.m);
  }
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.m, offset), __shfl_xor_sync(k_full_mask, v.s, offset)});
  }
  return v;
}

// Each warp merges with shuffles, warp 0 then merges the warps' pairs. The block's pair in every thread;
// every thread of the block (k_threads of them) must call it.
template <int k_threads>
__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum partial[k_threads / 32];
  __shared__ MaxSum result;
  v = warp_merge(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum w = threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : MaxSum{-INFINITY, 0.0f};
    w = warp_merge(w);
    if (threadIdx.x == 0) result = w;
  }
  __syncthreads();
  return result;
}

}  // namespace online
}  // namespace aisp::ch08::softmax
