// ch15:kv_transfer:01_per_block_copies — one cudaMemcpyPeerAsync per (block, layer, K or V) chunk.
//
// What it does: walks the block tables on the host and copies every contiguous run the layout has, a
// 32 KiB chunk (8 KV heads x 16 tokens x 128 x 2 B), from its source block on the peer to its destination
// block here, with the driver's peer copy (peer access is on: the copy engines move it over the link).
// What a first attempt does with a block table, and what a transfer library does when it hands the
// driver one descriptor per region.
// Why it is slow: the bytes are right but the copies are tiny. Each call costs the host a few
// microseconds in the driver and the copy engine a fixed setup per copy, against ~85 ns for 32 KiB on the
// link itself. The stream's queue fills long before the host is done, so the host waits on the GPU (the
// harness then times without its blocking kernel, launch cost inside the samples).
// Napkin math (defaults: 1024 blocks x 32 layers x K and V): 65,536 copies x ~2-3 us each = ~130-200 ms
// against 2 GiB / ~390 GB/s = ~5.5 ms at the link's rate: a few percent of the p2p ceiling.
// Run: aisp bench run --targets ch15:kv_transfer:01_per_block_copies
#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer::v01 {

void launch(const Args& a, cudaStream_t stream) {
  const Shape& s = a.shape;
  const auto chunk_bytes = static_cast<std::size_t>(s.chunk_elems()) * sizeof(__nv_bfloat16);
  for (std::int64_t i = 0; i < s.transfer_blocks(); ++i) {
    for (int layer = 0; layer < s.layers; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        AISP_CUDA_CHECK(cudaMemcpyPeerAsync(a.dst_pool + s.chunk_offset(layer, kv, a.dst_table_host[i]), a.device,
                                            a.src_pool + s.chunk_offset(layer, kv, a.src_table_host[i]), a.peer,
                                            chunk_bytes, stream));
      }
    }
  }
}

// "peer_gpu": with peer access enabled both ways (a ladder before this one in the process may have
// enabled the other direction), the driver may run a peer copy on the other GPU's copy engine, and the
// activity records then place it there (seen on nvidia-h200-x2 in the in-process correctness test).
AISP_REGISTER_VARIANT(KvTransferProblem, launch, .step = 1, .slug = "per_block_copies",
                      .kind = VariantKind::baseline,
                      .summary = "one cudaMemcpyPeerAsync per (block, layer, K/V) 32 KiB chunk",
                      .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::ch15::kv_transfer::v01
