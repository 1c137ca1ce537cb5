// ch15:kv_transfer:03_peer_kernel — one kernel here reads the listed blocks straight from the peer's pool.
//
// What changed: no staging and no copy engine. With peer access on (the problem enables it, CUDA C++
// Programming Guide, "Peer-to-Peer Memory Access"), a kernel on this GPU looks each chunk's source block up
// in the source table, loads it over the link with 16-byte loads, looks up its destination block and
// stores it in place: the gather, the transfer and the scatter of step 02 in one pass, every byte read
// once on the peer and written once here. The block tables are in this GPU's memory (an engine has them
// there already, as step metadata). The loop is ch02:p2p_copy's 02_peer_kernel with a table lookup on
// both sides.
// Why a grid-stride over 16-byte vectors, a full wave of CTAs with 4 loads in flight per thread, and not
// one CTA per (block, layer, K/V) chunk: the link's latency is longer than DRAM's, so what sets the rate is
// the bytes in flight (Little's law), which this keeps constant at any shape; a CTA per 32 KiB chunk ties
// the parallelism to the chunk size and ends with a tail of 65,536 CTAs. The table lookups and the divide
// per vector are a few integer operations under a microsecond of link latency, and the tables (8 KiB at
// the defaults) stay in L1/L2.
// Napkin math (defaults, H200 pair): 2 GiB at the link's ~375-395 GB/s = ~5.5 ms, no extra DRAM pass:
// expect ~95-100% of the p2p ceiling, as ch02's peer kernel reaches. The cost is the SMs: a decode GPU
// busy decoding would rather leave the copy to its copy engines (step 02's copy, or NCCL).
// Run: aisp bench run --targets ch15:kv_transfer:03_peer_kernel
#include "chapters/ch15_disaggregated_inference/kv_transfer/peer_block_copy.cuh"
#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer::v03 {

// The loop itself is in peer_block_copy.cuh, which the serving engine's K/V move uses too (one copy of
// the kernel's body); this step gives it a __global__ and maps the ladder's shape onto it.
namespace pc = peer_copy;

__global__ void peer_block_copy_kernel(const pc::BlockCopy a) {
  pc::copy_blocks(a);
}

void launch(const Args& a, cudaStream_t stream) {
  const Shape& s = a.shape;
  const pc::BlockCopy copy{reinterpret_cast<const uint4*>(a.src_pool),  // on the peer
                           reinterpret_cast<uint4*>(a.dst_pool),
                           a.src_table,
                           a.dst_table,
                           s.transfer_blocks(),
                           s.layers,
                           s.chunk_elems() / k_elems_per_vec,
                           s.pool_blocks(),
                           s.pool_blocks()};
  peer_block_copy_kernel<<<full_wave_blocks(a.sm_count, a.max_threads_per_sm, pc::k_threads), pc::k_threads, 0,
                           stream>>>(copy);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(KvTransferProblem, launch, .step = 3, .slug = "peer_kernel", .kind = VariantKind::optimized,
                      .summary = "one kernel here loads the listed blocks over the peer mapping, stores in place",
                      .features = {"multi_gpu"});

}  // namespace aisp::ch15::kv_transfer::v03
