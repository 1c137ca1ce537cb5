// ch15:kv_transfer step 03's kernel body (03_peer_kernel.cu says why it is shaped so), shared with the
// serving engine, whose prefill/decode disaggregation moves K/V with it (serving/gpu/kv_transfer.cu,
// LlamaRunner::copy_kv_blocks_from). One copy of the body; each user gives it its own __global__ (a
// kernel defined in a header included by two translation units would be defined twice). Plain CUDA: no
// harness header, so that serving/ can include it.
//
// Both pools are in the serving engine's layout, [layers][K, V][pool blocks][chunk], one chunk being a
// (layer, K or V, block)'s kv_heads x block_size x head_dim bf16, contiguous. The two pools may hold
// different numbers of blocks (a prefill GPU and a decode GPU size their pools apart). Listed block i
// is read from source block src_table[i] and written to destination block dst_table[i].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace aisp::ch15::kv_transfer::peer_copy {

constexpr int k_threads = 256;
constexpr int k_unroll = 4;  // 16-byte loads in flight per thread

struct BlockCopy {
  const uint4* src_pool;          // typically on the peer: loads cross the link
  uint4* dst_pool;                // on the GPU running the kernel: local stores
  const std::int32_t* src_table;  // [blocks], in memory the running GPU reads fast (its own)
  const std::int32_t* dst_table;  // [blocks]
  std::int64_t blocks;            // listed blocks
  int layers;
  std::int64_t chunk_vecs;        // 16-byte vectors per chunk: kv_heads * block_size * head_dim / 8
                                  // (the chunk must be a whole number of them)
  std::int64_t src_pool_blocks;   // blocks per (layer, K or V) in each pool
  std::int64_t dst_pool_blocks;
};

struct Where {
  std::int64_t src, dst;  // 16-byte vector offsets in the source and the destination pool
};

// Vector v of the transfer is vector `at` of chunk (listed block, layer, K or V), in that order, so
// consecutive threads read and write consecutive 16 bytes of one chunk.
__device__ __forceinline__ Where locate(const BlockCopy& a, std::int64_t v) {
  const std::int64_t chunk = v / a.chunk_vecs;
  const std::int64_t at = v - chunk * a.chunk_vecs;
  const std::int64_t layer_kv = chunk % (2 * a.layers);  // 2 * layer + (0 for K, 1 for V)
  const std::int64_t listed = chunk / (2 * a.layers);
  return {(layer_kv * a.src_pool_blocks + a.src_table[listed]) * a.chunk_vecs + at,
          (layer_kv * a.dst_pool_blocks + a.dst_table[listed]) * a.chunk_vecs + at};
}

// The whole transfer, grid-stride: launch a full wave of k_threads-thread CTAs.
__device__ __forceinline__ void copy_blocks(const BlockCopy& a) {
  const std::int64_t n = a.blocks * 2 * a.layers * a.chunk_vecs;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; v + (k_unroll - 1) * stride < n; v += k_unroll * stride) {
    Where w[k_unroll];
    uint4 x[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) w[k] = locate(a, v + k * stride);
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) x[k] = a.src_pool[w[k].src];  // all four remote loads in flight
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) a.dst_pool[w[k].dst] = x[k];
  }
  for (; v < n; v += stride) {
    const Where w = locate(a, v);
    a.dst_pool[w.dst] = a.src_pool[w.src];
  }
}

}  // namespace aisp::ch15::kv_transfer::peer_copy
