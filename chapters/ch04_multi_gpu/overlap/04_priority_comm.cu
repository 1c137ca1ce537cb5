// ch04:overlap:04_priority_comm — 03 with each rank's communication stream at the greatest priority the
// GPU offers, so that NCCL's kernels get SMs before the next GEMM's blocks do.
//
// What changed against 03: one argument. CommStreams makes the communication streams with
// cudaStreamCreateWithPriority at cudaDeviceGetStreamPriorityRange's greatest priority (CUDA C++
// Programming Guide, "Stream Priorities": the block scheduler hands out pending blocks of higher-priority
// streams first; ch11:priorities measures it).
// Why it should help: when a GEMM ends, the next GEMM (queued long before) and the all-reduce its event has
// just released both wait for SMs. At equal priority nothing says which goes first, and a large GEMM's grid
// covers every SM: if the GEMM's blocks win, NCCL's kernel waits for a whole GEMM, the all-reduce starts
// that much later and the tail of the step grows. At a higher priority NCCL's blocks take the freed SMs
// first, and the GEMM runs beside them on the rest.
// What it cannot do: priority orders pending blocks, it never preempts running ones; a GEMM that already
// holds every SM keeps them until it ends. And the SMs NCCL takes are SMs the next GEMM lacks: the gain is
// the earlier start of each all-reduce, at the price of a slower GEMM beside it (the sum can be nothing).
// Napkin math (2 x H200, defaults; predictions, not measurements): at most one GEMM's ~0.2 ms per bucket
// of delay removed from the communication stream's schedule; since 02's all-reduces already keep pace with
// the GEMMs, expect a small gain or no significant difference at the defaults, more where all-reduces wait
// behind long GEMMs (large tokens).
// Run: aisp bench run -t ch04:overlap:04_priority_comm --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/common/comm_streams.hpp"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap::v04 {

class PriorityComm {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_buckets = assign_buckets(a.shape.layers, a.shape.layer_bytes(), a.bucket_bytes);
    m_streams.create(a.devices());
    m_comm_streams.create(a.devices(), m_buckets.size(), true);
    m_gemms.create(a);
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks));
  }

  void launch(const Args& a, cudaStream_t stream) {
    m_streams.fork(stream);
    for (int r = 0; r < a.ranks; ++r) m_comm_streams.fork(r, m_streams.stream(r, stream));
    std::size_t next = 0;  // the next bucket to all-reduce
    for (int l = a.shape.layers - 1; l >= 0; --l) {
      if (a.gemms()) {
        for (int r = 0; r < a.ranks; ++r) m_gemms.run(a, r, l, m_streams.stream(r, stream));
      }
      // Layer l completes the next bucket when it is that bucket's lowest layer.
      if (a.reduces() && next < m_buckets.size() && m_buckets[next].first_layer == l) {
        all_reduce(a, next++, stream);
      }
    }
    for (int r = 0; r < a.ranks; ++r) m_comm_streams.join(r, m_streams.stream(r, stream));
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args&) const {
    return {{"nccl", nccl::version_string(nccl::api())}, {"buckets", std::to_string(m_buckets.size())}};
  }

 private:
  // Bucket b on every rank, on the communication streams, once its last GEMM is done on each rank.
  void all_reduce(const Args& a, std::size_t b, cudaStream_t stream) {
    const Bucket& bucket = m_buckets[b];
    if (a.gemms()) {  // phase 2 runs no GEMMs: nothing to wait for
      for (int r = 0; r < a.ranks; ++r) {
        m_comm_streams.handoff(r, b, m_streams.stream(r, stream), m_comm_streams.stream(r));
      }
    }
    const auto& api = nccl::api();
    nccl::check(api.group_start(), "ncclGroupStart");
    for (int r = 0; r < a.ranks; ++r) {
      nccl::check(api.all_reduce(a.grad_of(r, bucket), a.out_of(r, bucket), a.count_of(bucket), ncclFloat32, ncclSum,
                                 m_comms[r], m_comm_streams.stream(r)),
                  "ncclAllReduce");
    }
    nccl::check(api.group_end(), "ncclGroupEnd");
  }

  std::vector<Bucket> m_buckets;  // in issue order
  RankStreams m_streams;          // declared before m_comms: the communicators go first
  CommStreams m_comm_streams;
  RankGemms m_gemms;
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, PriorityComm, .step = 4, .slug = "priority_comm",
                               .kind = VariantKind::optimized,
                               .summary = "03 with the communication streams at the greatest stream priority: NCCL's "
                                          "blocks get freed SMs before the next GEMM's",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::overlap::v04
