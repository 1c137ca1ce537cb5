// Prefill/decode disaggregation's K/V move between two GPUs' pools (LlamaRunner::copy_kv_blocks_from):
// ch15:kv_transfer step 03's kernel, run on the destination GPU, loading the listed blocks straight
// from the source GPU's pool over the peer mapping (which the caller has enabled).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace aisp::serving::gpu {

// Both pools in the runner's layout [layers][K, V][pool blocks][kv_heads][block_size][head_dim] bf16.
struct KvBlockCopyArgs {
  const __nv_bfloat16* src_pool;  // on the source GPU
  __nv_bfloat16* dst_pool;        // on the current (destination) GPU
  const std::int32_t* src_table;  // [blocks], on the destination GPU
  const std::int32_t* dst_table;  // [blocks], on the destination GPU
  std::int64_t blocks;
  int layers;
  std::int64_t chunk_elems;       // kv_heads * block_size * head_dim: a multiple of 8
  std::int64_t src_pool_blocks;   // blocks per (layer, K or V) of each pool, padding blocks included
  std::int64_t dst_pool_blocks;
  int sm_count;                   // of the destination GPU: a full wave of CTAs
  int max_threads_per_sm;
};

// Enqueues the copy on `stream` (of the destination GPU); nothing for blocks == 0.
void launch_kv_block_copy(const KvBlockCopyArgs& a, cudaStream_t stream);

}  // namespace aisp::serving::gpu
