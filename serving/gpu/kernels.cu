// The Llama runner's small kernels: memory-bound, so each one moves 16-byte vectors (8 bf16) and reads its
// input once. Techniques from ch08_occupancy_pipelines: the one-block-per-row normalization with the row
// kept in registers (ch08:rmsnorm:04_registers: one read of x, a shuffle-then-shared-memory block
// reduction, the instantiation picked by row_vectors_per_thread), and the residual add fused into it
// because HF rounds the sum to bf16 before it normalizes (so the fused kernel rounds it there too).
#include <cuda_bf16.h>

#include <climits>

#include "chapters/ch08_occupancy_pipelines/row_in_registers.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/kernels.hpp"

namespace aisp::serving::gpu {
namespace {

constexpr unsigned k_full_mask = 0xffffffffu;
constexpr int k_norm_threads = 256;

union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

template <int threads>
__device__ float block_sum(float v) {
  __shared__ float partial[threads / 32];
  __shared__ float result;
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    const float w = warp_sum(threadIdx.x < threads / 32 ? partial[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) result = w;
  }
  __syncthreads();
  return result;
}

__global__ void embed_kernel(const uint4* table, const std::int32_t* tokens, int vecs, uint4* out) {
  const std::int64_t src = static_cast<std::int64_t>(tokens[blockIdx.x]) * vecs;
  const std::int64_t dst = static_cast<std::int64_t>(blockIdx.x) * vecs;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) out[dst + i] = table[src + i];
}

// ch08:rmsnorm:04_registers with the residual add in front. Vector i of the row is
// threadIdx.x + k * threads; the row stays in registers between the sum of squares and the scaling.
template <int k_vecs>
__global__ void __launch_bounds__(k_norm_threads)
    add_rmsnorm_kernel(bf16* residual, const bf16* delta, const bf16* weight, bf16* out,
                       const std::int32_t* rows, int hidden, float eps) {
  const int vecs = hidden / 8;
  const std::int64_t r = rows ? rows[blockIdx.x] : blockIdx.x;
  auto* res = reinterpret_cast<uint4*>(residual + r * hidden);
  const auto* del = delta ? reinterpret_cast<const uint4*>(delta + r * hidden) : nullptr;
  const auto* w = reinterpret_cast<const uint4*>(weight);
  auto* y = reinterpret_cast<uint4*>(out + static_cast<std::int64_t>(blockIdx.x) * hidden);
  Vec8 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_norm_threads;
    if (i < vecs) {
      v[k].raw = res[i];
      if (del) {
        Vec8 d;
        d.raw = del[i];
#pragma unroll
        for (int p = 0; p < 4; ++p) v[k].pair[p] = __hadd2(v[k].pair[p], d.pair[p]);  // bf16(a + b)
        res[i] = v[k].raw;
      }
    }
  }
  float squares = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (threadIdx.x + k * k_norm_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        squares = fmaf(f.x, f.x, fmaf(f.y, f.y, squares));
      }
    }
  }
  // torch's mean is the sum times 1/N; rsqrt is CUDA's rsqrtf in torch's kernel too.
  const float rstd = rsqrtf(block_sum<k_norm_threads>(squares) * (1.0f / static_cast<float>(hidden)) + eps);
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_norm_threads;
    if (i < vecs) {
      Vec8 wv;
      wv.raw = w[i];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        const __nv_bfloat162 normed = __floats2bfloat162_rn(f.x * rstd, f.y * rstd);  // .to(input_dtype)
        v[k].pair[p] = __hmul2(wv.pair[p], normed);                                    // weight * x in bf16
      }
      y[i] = v[k].raw;
    }
  }
}

// One block per token; threads walk the (head, pair) rotations of q and k, then the v vectors.
// Heads rotated per block: a decode step of one token still spreads its 40 heads (8B shape) over 10
// blocks instead of looping over them in one (7.3 us -> about a quarter, H100 profile in
// docs/serving-runner.md); a prefill keeps tokens x 10 blocks, plenty for the GPU.
constexpr int k_rope_heads_per_block = 4;
constexpr int k_rope_threads = 128;

__global__ void rope_kv_write_kernel(const RopeArgs a) {
  const int t = blockIdx.x;
  const int first_head = blockIdx.y * k_rope_heads_per_block;
  const int last_head = min(first_head + k_rope_heads_per_block, a.heads + a.kv_heads);
  const int half = a.head_dim / 2;
  const float position = static_cast<float>(a.positions[t]);
  bf16* row = a.qkv + static_cast<std::int64_t>(t) * a.qkv_stride;
  const std::int64_t slot = a.slots[t];
  const std::int64_t block = slot / a.block_size, offset = slot % a.block_size;
  const auto cache_at = [&](int kv_head) {
    return ((block * a.kv_heads + kv_head) * a.block_size + offset) * a.head_dim;
  };
  const int rotations = (last_head - first_head) * half;
  for (int i = threadIdx.x; i < rotations; i += blockDim.x) {
    const int head = first_head + i / half, d = i % half;
    // HF: freqs = inv_freq @ position in fp32 (one product), cos/sin in fp32, then cast to bf16.
    float s, c;
    sincosf(a.inv_freq[d] * position, &s, &c);
    const float cb = __bfloat162float(__float2bfloat16(c)), sb = __bfloat162float(__float2bfloat16(s));
    const bf16* x = row + head * a.head_dim;
    const float x1 = __bfloat162float(x[d]), x2 = __bfloat162float(x[d + half]);
    // q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q2, q1): every product and the sum in bf16.
    const bf16 lo = __hadd(__float2bfloat16(x1 * cb), __float2bfloat16(-x2 * sb));
    const bf16 hi = __hadd(__float2bfloat16(x2 * cb), __float2bfloat16(x1 * sb));
    if (head < a.heads) {
      bf16* q = row + head * a.head_dim;
      q[d] = lo;
      q[d + half] = hi;
    } else {
      bf16* k = a.k_cache + cache_at(head - a.heads);
      k[d] = lo;
      k[d + half] = hi;
    }
  }
  if (blockIdx.y != 0) return;  // the first block of each token copies its V rows
  const int v_vecs = a.kv_heads * a.head_dim / 8;
  const auto* v = reinterpret_cast<const uint4*>(row + (a.heads + a.kv_heads) * a.head_dim);
  for (int i = threadIdx.x; i < v_vecs; i += blockDim.x) {
    const int kv_head = i / (a.head_dim / 8), piece = i % (a.head_dim / 8);
    reinterpret_cast<uint4*>(a.v_cache + cache_at(kv_head))[piece] = v[i];
  }
}

__global__ void swiglu_kernel(bf16* gate_up, int n_tokens, int inter) {
  const int vecs_per_row = inter / 8;
  const std::int64_t total = static_cast<std::int64_t>(n_tokens) * vecs_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / vecs_per_row, c = i % vecs_per_row;
    auto* gate = reinterpret_cast<uint4*>(gate_up + r * 2 * inter) + c;
    const auto* up = reinterpret_cast<const uint4*>(gate_up + r * 2 * inter + inter) + c;
    Vec8 g, u;
    g.raw = *gate;
    u.raw = *up;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(g.pair[p]);
      // torch's silu in fp32 (x / (1 + exp(-x))), rounded to bf16, then the bf16 product with up.
      const __nv_bfloat162 act = __floats2bfloat162_rn(f.x / (1.0f + expf(-f.x)), f.y / (1.0f + expf(-f.y)));
      g.pair[p] = __hmul2(act, u.pair[p]);
    }
    *gate = g.raw;
  }
}

constexpr int k_argmax_threads = 512;

__device__ void keep_better(float& best, int& best_i, float v, int i) {
  if (v > best || (v == best && i < best_i)) {
    best = v;
    best_i = i;
  }
}

template <bool vectorized>
__global__ void __launch_bounds__(k_argmax_threads) argmax_kernel(const bf16* logits, int vocab, std::int32_t* out) {
  const bf16* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int best_i = INT_MAX;
  if constexpr (vectorized) {
    const auto* vecs = reinterpret_cast<const uint4*>(row);
    for (int i = threadIdx.x; i < vocab / 8; i += k_argmax_threads) {
      Vec8 v;
      v.raw = vecs[i];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v.pair[p]);
        keep_better(best, best_i, f.x, 8 * i + 2 * p);
        keep_better(best, best_i, f.y, 8 * i + 2 * p + 1);
      }
    }
  } else {
    for (int i = threadIdx.x; i < vocab; i += k_argmax_threads) keep_better(best, best_i, __bfloat162float(row[i]), i);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    keep_better(best, best_i, __shfl_xor_sync(k_full_mask, best, offset), __shfl_xor_sync(k_full_mask, best_i, offset));
  }
  __shared__ float best_s[k_argmax_threads / 32];
  __shared__ int index_s[k_argmax_threads / 32];
  if (threadIdx.x % 32 == 0) {
    best_s[threadIdx.x / 32] = best;
    index_s[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < k_argmax_threads / 32; ++w) keep_better(best, best_i, best_s[w], index_s[w]);
    // A row of NaN only (never in a sane model) keeps INT_MAX; report 0 rather than an impossible id.
    out[blockIdx.x] = best_i == INT_MAX ? 0 : best_i;
  }
}

// One thread per row: a single load each, the rows being `vocab` apart.
__global__ void gather_logits_kernel(const bf16* logits, int rows, int vocab, const std::int32_t* ids, float* out) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  const int id = ids[r];
  out[r] = id >= 0 && id < vocab ? __bfloat162float(logits[static_cast<std::int64_t>(r) * vocab + id])
                                 : __int_as_float(0x7fc00000);  // quiet NaN: no such token
}

}  // namespace

void launch_embed(const bf16* table, const std::int32_t* tokens, int n_tokens, int hidden, bf16* out,
                  cudaStream_t stream) {
  if (n_tokens == 0) return;
  embed_kernel<<<n_tokens, 256, 0, stream>>>(reinterpret_cast<const uint4*>(table), tokens, hidden / 8,
                                             reinterpret_cast<uint4*>(out));
  AISP_CHECK_LAUNCH();
}

void launch_add_rmsnorm(bf16* residual, const bf16* delta, const bf16* weight, bf16* out,
                        const std::int32_t* rows, int n_rows, int hidden, float eps, cudaStream_t stream) {
  if (n_rows == 0) return;
  const auto grid = static_cast<unsigned>(n_rows);
  switch (ch08::row_vectors_per_thread(hidden, k_norm_threads, "serving rmsnorm")) {
    case 1: add_rmsnorm_kernel<1><<<grid, k_norm_threads, 0, stream>>>(residual, delta, weight, out, rows, hidden, eps); break;
    case 2: add_rmsnorm_kernel<2><<<grid, k_norm_threads, 0, stream>>>(residual, delta, weight, out, rows, hidden, eps); break;
    case 4: add_rmsnorm_kernel<4><<<grid, k_norm_threads, 0, stream>>>(residual, delta, weight, out, rows, hidden, eps); break;
    default: add_rmsnorm_kernel<8><<<grid, k_norm_threads, 0, stream>>>(residual, delta, weight, out, rows, hidden, eps); break;
  }
  AISP_CHECK_LAUNCH();
}

void launch_rope_kv_write(const RopeArgs& a, cudaStream_t stream) {
  if (a.n_tokens == 0) return;
  const dim3 grid(static_cast<unsigned>(a.n_tokens),
                  static_cast<unsigned>((a.heads + a.kv_heads + k_rope_heads_per_block - 1) / k_rope_heads_per_block));
  rope_kv_write_kernel<<<grid, k_rope_threads, 0, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

void launch_swiglu(bf16* gate_up, int n_tokens, int inter, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const std::int64_t vecs = static_cast<std::int64_t>(n_tokens) * (inter / 8);
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((vecs + 255) / 256, 1 << 16));
  swiglu_kernel<<<blocks, 256, 0, stream>>>(gate_up, n_tokens, inter);
  AISP_CHECK_LAUNCH();
}

void launch_gather_logits(const bf16* logits, int rows, int vocab, const std::int32_t* ids, float* out,
                          cudaStream_t stream) {
  if (rows == 0) return;
  gather_logits_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(logits, rows, vocab, ids, out);
  AISP_CHECK_LAUNCH();
}

void launch_argmax(const bf16* logits, int rows, int vocab, std::int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  if (vocab % 8 == 0) {
    argmax_kernel<true><<<rows, k_argmax_threads, 0, stream>>>(logits, vocab, out);
  } else {
    argmax_kernel<false><<<rows, k_argmax_threads, 0, stream>>>(logits, vocab, out);
  }
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
