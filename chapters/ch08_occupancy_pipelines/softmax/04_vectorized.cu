// ch08:softmax:04_vectorized — 16-byte loads and stores: eight bf16 per instruction.
//
// What changed: both passes move the row as uint4 vectors of eight bf16 (the row length is a multiple of
// 8, so every row and vector is 16-byte aligned: enforced in problem.hpp). Thread t takes vectors t,
// t + 256, ...; the online (max, sum) update runs on the eight values of each vector in turn.
// Why it helps: a warp moves 512 contiguous bytes per load instruction instead of 64, so the row needs an
// eighth of the load/store instructions and each outstanding load carries 16 bytes instead of 2. With
// 2-byte loads a full SM keeps too few bytes in flight to cover DRAM latency (ch07:copy, step 03).
// Napkin math: the same 1.07 GB; a 16 KiB row is now 4 vector loads per thread (256 threads) instead of
// 32 scalar ones.
// Run: aisp bench run --targets ch08:softmax:04_vectorized
#include "chapters/ch08_occupancy_pipelines/softmax/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::softmax::v04 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// A partial softmax normalizer: the max of some values and the sum of exp(value - max) over them.
struct MaxSum {
  float m;
  float s;
};

__device__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: -inf - -inf would be NaN
  return {m, a.s * fast_exp(a.m - m) + b.s * fast_exp(b.m - m)};
}

__device__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.m, offset), __shfl_xor_sync(k_full_mask, v.s, offset)});
  }
  return v;
}

// Each warp merges with shuffles, warp 0 then merges the warps' partials. The block's pair in every thread.
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

// Step 03's per-element update: a new max rescales what was summed so far (exp(-inf) = 0 at first).
__device__ void online_update(MaxSum& acc, float e) {
  if (e > acc.m) {
    acc.s = acc.s * fast_exp(acc.m - e) + 1.0f;
    acc.m = e;
  } else {
    acc.s += fast_exp(e - acc.m);
  }
}

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__global__ void __launch_bounds__(k_threads) softmax_vectorized_kernel(const __nv_bfloat16* __restrict__ x,
                                                                       __nv_bfloat16* __restrict__ y,
                                                                       int cols) {
  const int vecs = cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(blockIdx.x) * cols);
  auto* out = reinterpret_cast<uint4*>(y + static_cast<std::size_t>(blockIdx.x) * cols);
  MaxSum acc{-INFINITY, 0.0f};
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v;
    v.raw = in[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      online_update(acc, f.x);
      online_update(acc, f.y);
    }
  }
  const MaxSum row = block_merge(acc);
  const float inv_sum = 1.0f / row.s;
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v;
    v.raw = in[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      v.pair[p] = __floats2bfloat162_rn(fast_exp(f.x - row.m) * inv_sum, fast_exp(f.y - row.m) * inv_sum);
    }
    out[i] = v.raw;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  softmax_vectorized_kernel<<<a.rows, k_threads, 0, stream>>>(a.x, a.y, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(SoftmaxProblem, launch, .step = 4, .slug = "vectorized", .kind = VariantKind::step,
                      .summary = "16-byte vectors (8 bf16) in both passes over the row");

}  // namespace aisp::ch08::softmax::v04
