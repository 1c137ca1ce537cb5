// ch15:kv_transfer:02_gather_copy_scatter — pack on the peer, one big peer copy, unpack here.
//
// What changed: instead of 65,536 small copies, a kernel on the peer gathers every listed chunk into one
// contiguous staging slab ([listed block][layer][K, V][chunk], a block's whole KV in one piece: the wire
// format a transfer library sends), one cudaMemcpyPeerAsync moves the slab, and a kernel here scatters
// it into the destination blocks. The staging slabs (one per GPU, the size of the transfer) are allocated
// in setup, outside the timed launches. The peer's kernel runs on a stream of the peer's own, joined to
// the harness stream by events both ways; it is work on the next GPU, declared as the peer_gpu feature.
// Why it helps: the link sees one 2 GiB copy instead of 65,536 of 32 KiB, so no per-copy cost at all; the
// price is two extra passes over DRAM (read + write on each side) and the staging memory.
// Napkin math (defaults, H200 pair): gather 2 x 2 GiB on the peer's DRAM at ~4 TB/s = ~1 ms, the copy
// 2 GiB at ~390 GB/s = ~5.5 ms, the scatter ~1 ms here: ~7.5 ms one after the other, ~70-75% of the p2p
// ceiling. Pipelining the three in slices would hide the packing; step 03 removes it instead.
// Run: aisp bench run --targets ch15:kv_transfer:02_gather_copy_scatter
#include "chapters/ch15_disaggregated_inference/kv_transfer/problem.hpp"

namespace aisp::ch15::kv_transfer::v02 {

constexpr int k_threads = 256;

// Makes `device` current for a scope: launches and event records go to the current device's context.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    AISP_CUDA_CHECK(cudaGetDevice(&m_saved));
    AISP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~OnDevice() { cudaSetDevice(m_saved); }  // cannot fail for a device that was current a moment ago
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int m_saved = 0;
};

// Vector v of the slab is 16-byte vector `at` of chunk `chunk` = (listed block, layer, K or V) in that
// order, so consecutive threads touch consecutive 16 bytes of one 32 KiB chunk on both sides.
__device__ std::int64_t pool_vector(const Shape& s, const std::int32_t* table, std::int64_t v,
                                    std::int64_t per_chunk) {
  const std::int64_t chunk = v / per_chunk;
  const std::int64_t at = v - chunk * per_chunk;
  const int layer_kv = static_cast<int>(chunk % (2 * s.layers));
  const std::int64_t listed = chunk / (2 * s.layers);
  return s.chunk_offset(layer_kv / 2, layer_kv % 2, table[listed]) / k_elems_per_vec + at;
}

// On the peer: its own pool (local reads) into its own slab (local writes).
__global__ void gather_kernel(const uint4* __restrict__ pool, const std::int32_t* __restrict__ src_table,
                              uint4* __restrict__ slab, const Shape s) {
  const std::int64_t per_chunk = s.chunk_elems() / k_elems_per_vec;
  const std::int64_t n = s.chunks_moved() * per_chunk;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    slab[v] = pool[pool_vector(s, src_table, v, per_chunk)];
  }
}

// Here: the received slab into the destination blocks.
__global__ void scatter_kernel(const uint4* __restrict__ slab, const std::int32_t* __restrict__ dst_table,
                               uint4* __restrict__ pool, const Shape s) {
  const std::int64_t per_chunk = s.chunk_elems() / k_elems_per_vec;
  const std::int64_t n = s.chunks_moved() * per_chunk;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    pool[pool_vector(s, dst_table, v, per_chunk)] = slab[v];
  }
}

class GatherCopyScatter {
 public:
  GatherCopyScatter() = default;
  GatherCopyScatter(const GatherCopyScatter&) = delete;
  GatherCopyScatter& operator=(const GatherCopyScatter&) = delete;
  ~GatherCopyScatter() {
    if (m_ready) cudaEventDestroy(m_ready);
    if (m_peer_stream || m_packed) {
      // Not OnDevice: a destructor must not throw. Errors here are sticky ones already reported.
      int saved = 0;
      cudaGetDevice(&saved);
      cudaSetDevice(m_peer);
      if (m_packed) cudaEventDestroy(m_packed);
      if (m_peer_stream) cudaStreamDestroy(m_peer_stream);
      cudaSetDevice(saved);
    }
  }

  void setup(const Args& a, cudaStream_t) {
    const auto vectors = static_cast<std::size_t>(a.shape.bytes_moved()) / sizeof(uint4);
    m_peer = a.peer;
    m_here = DeviceBuffer<uint4>(vectors);
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_ready, cudaEventDisableTiming));
    OnDevice on_peer(a.peer);
    m_there = DeviceBuffer<uint4>(vectors);
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_peer_stream, cudaStreamNonBlocking));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_packed, cudaEventDisableTiming));
    // The peer's own launch geometry, from the peer (the two GPUs of a pair are usually alike, not always).
    int sms = 0, threads_per_sm = 0;
    AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.peer));
    AISP_CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, a.peer));
    m_peer_blocks = full_wave_blocks(sms, threads_per_sm, k_threads);
  }

  void launch(const Args& a, cudaStream_t stream) {
    // The peer starts after everything before it on the harness stream (the timer's start event included).
    AISP_CUDA_CHECK(cudaEventRecord(m_ready, stream));
    {
      OnDevice on_peer(a.peer);
      AISP_CUDA_CHECK(cudaStreamWaitEvent(m_peer_stream, m_ready, 0));
      gather_kernel<<<m_peer_blocks, k_threads, 0, m_peer_stream>>>(
          reinterpret_cast<const uint4*>(a.src_pool), a.src_table_peer, m_there.data(), a.shape);
      AISP_CHECK_LAUNCH();
      AISP_CUDA_CHECK(cudaEventRecord(m_packed, m_peer_stream));
    }
    AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, m_packed, 0));
    AISP_CUDA_CHECK(cudaMemcpyPeerAsync(m_here.data(), a.device, m_there.data(), a.peer, m_here.bytes(), stream));
    scatter_kernel<<<full_wave_blocks(a.sm_count, a.max_threads_per_sm, k_threads), k_threads, 0, stream>>>(
        m_here.data(), a.dst_table, reinterpret_cast<uint4*>(a.dst_pool), a.shape);
    AISP_CHECK_LAUNCH();
  }

 private:
  int m_peer = 0;
  int m_peer_blocks = 0;
  DeviceBuffer<uint4> m_here;   // the slab as received, on this GPU
  DeviceBuffer<uint4> m_there;  // the slab as packed, on the peer
  cudaStream_t m_peer_stream = nullptr;
  cudaEvent_t m_ready = nullptr;   // on this GPU: the harness stream reached the launch
  cudaEvent_t m_packed = nullptr;  // on the peer: the slab is packed
};

AISP_REGISTER_STATEFUL_VARIANT(KvTransferProblem, GatherCopyScatter, .step = 2, .slug = "gather_copy_scatter",
                               .kind = VariantKind::step,
                               .summary = "pack the listed blocks on the peer, one peer copy, unpack here",
                               // peer_gpu: the gather kernel runs on the next GPU, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::ch15::kv_transfer::v02
