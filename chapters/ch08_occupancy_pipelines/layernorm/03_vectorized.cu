// ch08:layernorm:03_vectorized — 16-byte loads and stores: eight bf16 per instruction.
//
// What changed: x, weight, bias and y move as uint4 vectors of eight bf16 (the row length is a multiple of
// 8, so every row and vector is 16-byte aligned: enforced in problem.hpp). Thread t takes vectors t,
// t + 256, ...; the Welford update runs on the eight values of each vector in turn.
// Why it helps: a warp moves 512 contiguous bytes per load instruction instead of 64, so the row needs an
// eighth of the load/store instructions and each outstanding load carries 16 bytes instead of 2: more
// bytes in flight per SM for the same number of warps (ch07:copy, step 03).
// Napkin math: the same 1.07 GB; a 16 KiB row is 4 vector loads per thread and pass instead of 32.
// Run: aisp bench run --targets ch08:layernorm:03_vectorized
#include "chapters/ch08_occupancy_pipelines/layernorm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::layernorm::v03 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// Welford's running statistics of some values: how many, their mean, and the sum of squared deviations.
struct Stats {
  float n;
  float mean;
  float m2;
};

// Chan, Golub and LeVeque's pairwise combination of two partial statistics.
__device__ Stats merge(Stats a, Stats b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float fb = __fdividef(b.n, n);
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

__device__ Stats warp_merge(Stats v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.n, offset), __shfl_xor_sync(k_full_mask, v.mean, offset),
                  __shfl_xor_sync(k_full_mask, v.m2, offset)});
  }
  return v;
}

// Each warp merges with shuffles, warp 0 then merges the warps' partials. The block's triple everywhere.
__device__ Stats block_merge(Stats v) {
  __shared__ Stats partial[k_threads / 32];
  __shared__ Stats result;
  v = warp_merge(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    Stats w = threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : Stats{0.0f, 0.0f, 0.0f};
    w = warp_merge(w);
    if (threadIdx.x == 0) result = w;
  }
  __syncthreads();
  return result;
}

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__device__ void welford_update(Stats& s, float v) {
  s.n += 1.0f;
  const float delta = v - s.mean;
  s.mean += __fdividef(delta, s.n);
  s.m2 += delta * (v - s.mean);
}

__global__ void __launch_bounds__(k_threads) layernorm_vectorized_kernel(Args a) {
  const int vecs = a.cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(a.x + static_cast<std::size_t>(blockIdx.x) * a.cols);
  const auto* w = reinterpret_cast<const uint4*>(a.weight);
  const auto* b = reinterpret_cast<const uint4*>(a.bias);
  auto* out = reinterpret_cast<uint4*>(a.y + static_cast<std::size_t>(blockIdx.x) * a.cols);
  Stats s{0.0f, 0.0f, 0.0f};
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v;
    v.raw = in[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      welford_update(s, f.x);
      welford_update(s, f.y);
    }
  }
  const Stats row = block_merge(s);
  const float rstd = rsqrtf(row.m2 / a.cols + k_eps);
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v, wv, bv;
    v.raw = in[i];
    wv.raw = w[i];
    bv.raw = b[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      const float2 fw = __bfloat1622float2(wv.pair[p]);
      const float2 fb = __bfloat1622float2(bv.pair[p]);
      v.pair[p] = __floats2bfloat162_rn((f.x - row.mean) * rstd * fw.x + fb.x,
                                        (f.y - row.mean) * rstd * fw.y + fb.y);
    }
    out[i] = v.raw;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  layernorm_vectorized_kernel<<<a.rows, k_threads, 0, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(LayernormProblem, launch, .step = 3, .slug = "vectorized",
                      .kind = VariantKind::step,
                      .summary = "16-byte vectors (8 bf16) for x, weight, bias and y");

}  // namespace aisp::ch08::layernorm::v03
