// The clear attention kernel: correctness first, speed never. One warp per (query token, query head); the
// warp walks the keys 0..position one at a time, each lane holding head_dim / 32 consecutive values of q,
// k, v and the output (so a row of K or V is one coalesced warp-wide load of 128 or 256 bytes), and
// keeps the softmax online (Milakov & Gimelshein 2018): running max m, running sum l, and the output
// accumulator rescaled by 2^(m_old - m_new) when the max grows. Scores are in the log2 domain
// (q pre-scaled by scale * log2(e)), as every attention kernel in this project.
// Cost: 5 shuffles and an exp2 per key per (token, head), K and V reread by every query head of a group:
// fine for tests and debugging (RunnerOptions::attention = reference), far from the fast kernels.
#include <cuda_bf16.h>

#include "device/cuda_check.hpp"
#include "serving/gpu/attention.hpp"

namespace aisp::serving::gpu {
namespace {

constexpr int k_warps = 4;
constexpr unsigned k_full_mask = 0xffffffffu;
constexpr float k_log2e = 1.4426950408889634f;

__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// E = head_dim / 32 values per lane, read as E / 2 bf16 pairs.
template <int D>
__global__ void __launch_bounds__(32 * k_warps) attention_reference_kernel(const AttentionArgs a) {
  constexpr int E = D / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * k_warps + threadIdx.x / 32;
  if (item >= static_cast<std::int64_t>(a.num_tokens) * a.heads) return;  // warp-uniform
  const int token = static_cast<int>(item / a.heads), head = static_cast<int>(item % a.heads);
  const int seq = a.token_seq[token];
  // The token's position: the sequence's last token sits at context - 1.
  const int position = a.context_len[seq] - (a.query_start[seq + 1] - token);
  const int kv_head = head / (a.heads / a.kv_heads);
  const std::int32_t* table = a.block_table + static_cast<std::int64_t>(seq) * a.table_stride;

  const auto* q2 = reinterpret_cast<const __nv_bfloat162*>(
      a.qkv + static_cast<std::int64_t>(token) * a.qkv_stride + head * D + lane * E);
  float q[E];
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 f = __bfloat1622float2(q2[i]);
    q[2 * i] = f.x * a.scale * k_log2e;
    q[2 * i + 1] = f.y * a.scale * k_log2e;
  }

  float m = -INFINITY, l = 0.0f, acc[E] = {};
  for (int key = 0; key <= position; ++key) {
    const std::int64_t page = table[key / a.block_size];
    const std::int64_t row = ((page * a.kv_heads + kv_head) * a.block_size + key % a.block_size) * D;
    const auto* k2 = reinterpret_cast<const __nv_bfloat162*>(a.k_cache + row + lane * E);
    const auto* v2 = reinterpret_cast<const __nv_bfloat162*>(a.v_cache + row + lane * E);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < E / 2; ++i) {
      const float2 k = __bfloat1622float2(k2[i]);
      dot = fmaf(q[2 * i], k.x, fmaf(q[2 * i + 1], k.y, dot));
    }
    const float s = warp_sum(dot);
    const float m_new = fmaxf(m, s);  // finite from key 0 on
    const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
    l = l * alpha + p;
    m = m_new;
#pragma unroll
    for (int i = 0; i < E / 2; ++i) {
      const float2 v = __bfloat1622float2(v2[i]);
      acc[2 * i] = fmaf(p, v.x, acc[2 * i] * alpha);
      acc[2 * i + 1] = fmaf(p, v.y, acc[2 * i + 1] * alpha);
    }
  }
  auto* out2 = reinterpret_cast<__nv_bfloat162*>(
      a.out + static_cast<std::int64_t>(token) * a.heads * D + head * D + lane * E);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) out2[i] = __floats2bfloat162_rn(acc[2 * i] / l, acc[2 * i + 1] / l);
}

}  // namespace

bool attention_supports(int head_dim, int block_size, int group) {
  return (head_dim == 64 || head_dim == 128) && (block_size == 8 || block_size == 16 || block_size == 32) &&
         group >= 1 && group <= 8;
}

void launch_attention_reference(const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return;
  const std::int64_t warps = static_cast<std::int64_t>(a.num_tokens) * a.heads;
  const auto blocks = static_cast<unsigned>((warps + k_warps - 1) / k_warps);
  if (a.head_dim == 64) {
    attention_reference_kernel<64><<<blocks, 32 * k_warps, 0, stream>>>(a);
  } else {
    attention_reference_kernel<128><<<blocks, 32 * k_warps, 0, stream>>>(a);
  }
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
