// The K/V move of prefill/decode disaggregation (kv_transfer.hpp). The kernel body is ch15:kv_transfer
// step 03's own (peer_block_copy.cuh); this file only gives it a __global__ and the grid.
#include "serving/gpu/kv_transfer.hpp"

#include "chapters/ch15_disaggregated_inference/kv_transfer/peer_block_copy.cuh"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

namespace pc = ::aisp::ch15::kv_transfer::peer_copy;

namespace {

__global__ void kv_block_copy_kernel(const pc::BlockCopy a) {
  pc::copy_blocks(a);
}

}  // namespace

void launch_kv_block_copy(const KvBlockCopyArgs& a, cudaStream_t stream) {
  if (a.blocks <= 0) return;
  constexpr std::int64_t k_elems_per_vec = 16 / sizeof(__nv_bfloat16);
  const pc::BlockCopy copy{reinterpret_cast<const uint4*>(a.src_pool),
                           reinterpret_cast<uint4*>(a.dst_pool),
                           a.src_table,
                           a.dst_table,
                           a.blocks,
                           a.layers,
                           a.chunk_elems / k_elems_per_vec,
                           a.src_pool_blocks,
                           a.dst_pool_blocks};
  // A full wave, as the ladder's step: the link's latency wants bytes in flight, not more CTAs.
  const int grid = a.sm_count * (a.max_threads_per_sm / pc::k_threads);
  kv_block_copy_kernel<<<grid, pc::k_threads, 0, stream>>>(copy);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
