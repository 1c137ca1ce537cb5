// ch15:kv_transfer — the trusted device reference. Deliberately plain: the whole reference pool set to
// 0xFF (the value the harness's poison leaves in the blocks a transfer must not touch), then one thread per
// bf16 element of the listed chunks, scalar loads over the peer mapping, the index computed from the
// engine's layout one coordinate at a time. Right, not fast; the host reference (reference.hpp) checks
// it at the test size.
#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer {
namespace {

__global__ void reference_transfer_kernel(const Args a, __nv_bfloat16* ref) {
  const Shape& s = a.shape;
  const std::int64_t n = s.chunks_moved() * s.chunk_elems();
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    // i runs over [listed block][layer][K, V][kv head][slot][d].
    const int d = static_cast<int>(i % s.head_dim);
    const int slot = static_cast<int>(i / s.head_dim % s.block_size);
    const int head = static_cast<int>(i / (std::int64_t{s.head_dim} * s.block_size) % s.kv_heads);
    const std::int64_t chunk = i / s.chunk_elems();
    const int kv = static_cast<int>(chunk % 2);
    const int layer = static_cast<int>(chunk / 2 % s.layers);
    const std::int64_t listed = chunk / (2 * s.layers);
    const std::int64_t from = s.element_offset(layer, kv, a.src_table[listed], head, slot, d);
    const std::int64_t to = s.element_offset(layer, kv, a.dst_table[listed], head, slot, d);
    ref[to] = a.src_pool[from];
  }
}

}  // namespace

void launch_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(ref, 0xFF, static_cast<std::size_t>(a.shape.pool_elems()) * sizeof(*ref), stream));
  if (a.shape.chunks_moved() == 0) return;
  reference_transfer_kernel<<<a.sm_count * 4, 256, 0, stream>>>(a, ref);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch15::kv_transfer
