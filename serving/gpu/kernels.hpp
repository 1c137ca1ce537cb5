// The Llama runner's small kernels (kernels.cu). Every one reproduces the bf16 roundings of Hugging Face's
// LlamaForCausalLM in bf16, so that the only differences left against it are the order of fp32 sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace aisp::serving::gpu {

using bf16 = __nv_bfloat16;

// out[t] = table[tokens[t]]: rows of `hidden` bf16 (hidden % 8 == 0).
void launch_embed(const bf16* table, const std::int32_t* tokens, int n_tokens, int hidden, bf16* out,
                  cudaStream_t stream);

// For j < n_rows, r = rows ? rows[j] : j:
//   h = delta ? bf16(residual[r] + delta[r]) : residual[r];  residual[r] = h   (HF: residual + x in bf16)
//   out[j] = bf16(bf16(h * rsqrt(mean(h^2) + eps)) * weight)              (HF's LlamaRMSNorm)
// with the statistics in fp32. hidden % 8 == 0 and hidden <= 16384.
void launch_add_rmsnorm(bf16* residual, const bf16* delta, const bf16* weight, bf16* out,
                        const std::int32_t* rows, int n_rows, int hidden, float eps, cudaStream_t stream);

// RoPE (HF's rotate_half: dim i pairs with i + head_dim / 2) on the q and k heads of each fused QKV row,
// in place for q; the rotated k and the v of each token go to its cache slot (block * block_size +
// offset) in the layer's pools [num_blocks][kv_heads][block_size][head_dim]. cos and sin are HF's: fp32
// cos(position * inv_freq[i]) rounded to bf16, then q * cos + rotate_half(q) * sin with each product and
// the sum rounded to bf16.
struct RopeArgs {
  bf16* qkv;
  int qkv_stride;
  const std::int32_t* positions;
  const std::int32_t* slots;
  const float* inv_freq;  // [head_dim / 2]
  int n_tokens, heads, kv_heads, head_dim, block_size;
  bf16* k_cache;
  bf16* v_cache;
};
void launch_rope_kv_write(const RopeArgs& a, cudaStream_t stream);

// In place on rows [gate (inter) | up (inter)]: gate := bf16(bf16(silu(gate)) * up). The down projection
// then reads the gate half with a leading dimension of 2 * inter. inter % 8 == 0.
void launch_swiglu(bf16* gate_up, int n_tokens, int inter, cudaStream_t stream);

// out[r] = the index of the largest of row r's `vocab` logits, the lowest index among equal ones (as
// torch.argmax). Rows are `vocab` apart.
void launch_argmax(const bf16* logits, int rows, int vocab, std::int32_t* out, cudaStream_t stream);

// out[r] = row r's logit of token ids[r], as fp32 (exactly the bf16 value: bf16 is fp32's top half); NaN
// where ids[r] is outside [0, vocab). The judge's two numbers per row (the token's logit, the best one's)
// without copying any row of `vocab` logits to the host.
void launch_gather_logits(const bf16* logits, int rows, int vocab, const std::int32_t* ids, float* out,
                          cudaStream_t stream);

}  // namespace aisp::serving::gpu
