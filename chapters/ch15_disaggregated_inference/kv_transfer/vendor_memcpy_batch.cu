// ch15:kv_transfer:vendor_memcpy_batch — the driver's batched copy: cudaMemcpyBatchAsync of every chunk.
//
// The same 65,536 (block, layer, K/V) chunks as step 01, handed to the driver in one call (CUDA 12.8+,
// CUDA Runtime API "Memory Management": cudaMemcpyBatchAsync): a list of (destination, source, size), one
// attribute set for all (sources read in stream order, as any copy after the prefill's kernels must), and
// the driver plans the copies on its copy engines as it sees fit. No staging and no SMs. This is the
// vendor answer to "peer copies of block lists" short of NCCL, which the project does not build against
// (README). The pointer lists are rebuilt from the host tables on every launch: the tables change with
// every input, and a transfer library builds them per request too.
// Napkin math: if the driver's per-copy cost in a batch is small, ~5.5 ms for 2 GiB at the link's rate;
// what it really costs per copy is the measurement's point (step 01 pays ~2-3 us a copy).
// Run: aisp bench run --targets ch15:kv_transfer:vendor_memcpy_batch
#include <vector>

#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer::vendor {

class MemcpyBatch {
 public:
  void setup(const Args& a, cudaStream_t) {
    const auto n = static_cast<std::size_t>(a.shape.chunks_moved());
    m_dsts.reserve(n);
    m_srcs.reserve(n);
    m_sizes.assign(n, static_cast<std::size_t>(a.shape.chunk_elems()) * sizeof(__nv_bfloat16));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const Shape& s = a.shape;
    m_dsts.clear();
    m_srcs.clear();
    for (std::int64_t i = 0; i < s.transfer_blocks(); ++i) {
      for (int layer = 0; layer < s.layers; ++layer) {
        for (int kv = 0; kv < 2; ++kv) {
          m_dsts.push_back(a.dst_pool + s.chunk_offset(layer, kv, a.dst_table_host[i]));
          m_srcs.push_back(a.src_pool + s.chunk_offset(layer, kv, a.src_table_host[i]));
        }
      }
    }
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // after the work before it on the stream
    std::size_t first = 0;  // attrs applies from copy 0 to the end
    AISP_CUDA_CHECK(cudaMemcpyBatchAsync(m_dsts.data(), m_srcs.data(), m_sizes.data(), m_dsts.size(), &attrs,
                                         &first, 1, stream));
  }

 private:
  std::vector<void*> m_dsts;
  std::vector<const void*> m_srcs;
  std::vector<std::size_t> m_sizes;
};

// "peer_gpu": with peer access enabled both ways (a ladder before this one in the process may have
// enabled the other direction), the driver may run a peer copy on the other GPU's copy engine, and the
// activity records then place it there (seen on nvidia-h200-x2 in the in-process correctness test).
AISP_REGISTER_STATEFUL_VARIANT(KvTransferProblem, MemcpyBatch, .step = 0, .slug = "memcpy_batch",
                               .kind = VariantKind::vendor,
                               .summary = "cudaMemcpyBatchAsync: every chunk in one call to the driver",
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::ch15::kv_transfer::vendor
