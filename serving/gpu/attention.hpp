// Attention over the engine's paged KV cache, for a ragged batch: sequence s has n_new(s) query tokens at
// positions start(s) .. start(s) + n_new(s) - 1, and its keys and values 0 .. context(s) - 1 (context =
// start + n_new; the new tokens' K and V are already written) sit in the pages its block table names.
// Query token at position p attends causally to keys 0..p. GQA: query head h reads KV head
// h / (heads / kv_heads). Scores, softmax statistics and sums in fp32; scale 1 / sqrt(head_dim) as HF.
//
// Layouts (every index int32, every buffer on the device):
//   qkv          [tokens][qkv_stride] bf16: the fused projection, q heads at column 0 (RoPE applied)
//   k_cache,
//   v_cache      [num_blocks][kv_heads][block_size][head_dim] bf16: one layer's pools, the ch16 page
//                layout (chapters/ch16_production_inference/paged_attention/problem.hpp)
//   out          [tokens][heads * head_dim] bf16
//   query_start  [seqs + 1]: sequence s owns tokens query_start[s] .. query_start[s + 1] - 1
//   context_len  [seqs]
//   block_table  [seqs][table_stride]: physical block of each block_size positions
//   token_seq    [tokens]: the sequence of each token (the reference kernel's map)
//   decode_seqs  [num_decode]: the sequences with one query token (the split-KV decode kernel's)
//   prefill_tiles[num_prefill_tiles][2]: (sequence, first query index) of each 64-query tile of the
//                sequences with more than one query token (the tensor-core prefill kernel's)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "serving/gpu/step_metadata.hpp"  // k_prefill_tile_rows

namespace aisp::serving::gpu {

struct AttentionArgs {
  const __nv_bfloat16* qkv = nullptr;
  int qkv_stride = 0;
  const __nv_bfloat16* k_cache = nullptr;
  const __nv_bfloat16* v_cache = nullptr;
  __nv_bfloat16* out = nullptr;
  const std::int32_t* query_start = nullptr;
  const std::int32_t* context_len = nullptr;
  const std::int32_t* block_table = nullptr;
  int table_stride = 0;
  const std::int32_t* token_seq = nullptr;
  const std::int32_t* decode_seqs = nullptr;
  const std::int32_t* prefill_tiles = nullptr;
  int num_seqs = 0, num_tokens = 0, num_decode = 0, num_prefill_tiles = 0;
  int heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 0.0f;  // 1 / sqrt(head_dim)
};

// What the kernels accept; anything else is refused by the runner at construction.
[[nodiscard]] bool attention_supports(int head_dim, int block_size, int group);

// The clear kernel: one warp per (token, query head), keys one at a time, online softmax. Handles any
// ragged batch (decode and prefill alike) and is the oracle the fast kernels are tested against.
void launch_attention_reference(const AttentionArgs& a, cudaStream_t stream);

// The split-KV decode kernel (ch16:paged_attention step 05's design) for the sequences in decode_seqs.
// Splits each sequence's pages `splits` ways when the batch alone would not fill the GPU; the partial
// results go to `scratch` (decode_scratch_floats() floats), then a merge kernel writes out.
struct DecodePlan {
  int splits = 1;
  int pages_per_split = 1;
};
[[nodiscard]] DecodePlan plan_decode(const AttentionArgs& a, int max_context, int sm_count);
[[nodiscard]] std::int64_t decode_scratch_floats(const AttentionArgs& a, const DecodePlan& plan);
void launch_attention_decode(const AttentionArgs& a, const DecodePlan& plan, float* scratch,
                             cudaStream_t stream);

// The tensor-core prefill kernel (ch18:flash_attention step 03's design) for the tiles in prefill_tiles.
void launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream);

}  // namespace aisp::serving::gpu
