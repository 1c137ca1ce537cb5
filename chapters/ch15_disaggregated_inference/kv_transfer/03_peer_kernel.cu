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
#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer::v03 {

constexpr int k_threads = 256;
constexpr int k_unroll = 4;

struct Where {
  std::int64_t src, dst;  // 16-byte vector offsets in the source and the destination pool
};

// Vector v of the transfer is 16-byte vector `at` of chunk (listed block, layer, K or V), in that order,
// so consecutive threads read and write consecutive 16 bytes of one 32 KiB chunk.
__device__ Where locate(const Args& a, std::int64_t v, std::int64_t per_chunk) {
  const Shape& s = a.shape;
  const std::int64_t chunk = v / per_chunk;
  const std::int64_t at = v - chunk * per_chunk;
  const int layer_kv = static_cast<int>(chunk % (2 * s.layers));
  const std::int64_t listed = chunk / (2 * s.layers);
  const int layer = layer_kv / 2, kv = layer_kv % 2;
  return {s.chunk_offset(layer, kv, a.src_table[listed]) / k_elems_per_vec + at,
          s.chunk_offset(layer, kv, a.dst_table[listed]) / k_elems_per_vec + at};
}

__global__ void peer_block_copy_kernel(const Args a) {
  const auto* src = reinterpret_cast<const uint4*>(a.src_pool);  // on the peer: loads cross the link
  auto* dst = reinterpret_cast<uint4*>(a.dst_pool);              // here: local stores
  const std::int64_t per_chunk = a.shape.chunk_elems() / k_elems_per_vec;
  const std::int64_t n = a.shape.chunks_moved() * per_chunk;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; v + (k_unroll - 1) * stride < n; v += k_unroll * stride) {
    Where w[k_unroll];
    uint4 x[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) w[k] = locate(a, v + k * stride, per_chunk);
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) x[k] = src[w[k].src];  // all four remote loads in flight at once
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) dst[w[k].dst] = x[k];
  }
  for (; v < n; v += stride) {
    const Where w = locate(a, v, per_chunk);
    dst[w.dst] = src[w.src];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  peer_block_copy_kernel<<<full_wave_blocks(a.sm_count, a.max_threads_per_sm, k_threads), k_threads, 0,
                           stream>>>(a);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(KvTransferProblem, launch, .step = 3, .slug = "peer_kernel", .kind = VariantKind::optimized,
                      .summary = "one kernel here loads the listed blocks over the peer mapping, stores in place",
                      .features = {"multi_gpu"});

}  // namespace aisp::ch15::kv_transfer::v03
