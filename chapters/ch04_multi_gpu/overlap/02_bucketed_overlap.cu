// ch04:overlap:02_bucketed_overlap — each layer's gradient all-reduced as soon as its GEMM is done, on a
// second stream, while the GEMMs of the layers below run: the overlap DDP's buckets are for.
//
// What changed against 01: the all-reduce leaves the compute stream. Each rank gets a communication stream
// (comm_streams.hpp). Backward produces the last layer's gradient first; right after layer l's GEMM an event
// is recorded on the compute stream, the communication stream waits for it (cudaStreamWaitEvent: a
// device-side wait, the host never blocks), and layer l's slice of the gradient buffer is all-reduced there
// while layer l - 1's GEMM starts on the compute stream. Buckets: one layer each, in the order backward
// produces them. Every rank's all-reduce of one bucket goes in one group call (NCCL user guide, "Group
// Calls"); NCCL runs a communicator's collectives in the order they are issued, the same on every rank.
// Why it should help: the links now work during the backward pass. Only the last bucket's all-reduce
// cannot overlap anything, so the exposed communication falls from the whole all-reduce to about one
// layer's, plus what sharing the GPU costs: NCCL's kernels occupy SMs and DRAM bandwidth the GEMMs
// running beside them no longer have, and a GEMM grid that holds every SM keeps NCCL's kernel waiting
// until it ends (blocks are never preempted).
// Napkin math (2 x H200, defaults; predictions, not measurements): 16 all-reduces of 64 MiB, each ~0.19 ms
// at ~350 GB/s of bus bandwidth, against GEMMs of ~0.2 ms each: the all-reduces keep pace, and the step
// ~ 3.1 ms of GEMMs + one layer's ~0.2 ms all-reduce ~ 3.3 ms, against 01's ~6.2 ms; more where sharing
// the SMs slows the GEMMs.
// Run: aisp bench run -t ch04:overlap:02_bucketed_overlap --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/common/comm_streams.hpp"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap::v02 {

class BucketedOverlap {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_buckets = per_layer_buckets(a.shape.layers);
    m_streams.create(a.devices());
    m_comm_streams.create(a.devices(), m_buckets.size(), false);
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

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, BucketedOverlap, .step = 2, .slug = "bucketed_overlap",
                               .kind = VariantKind::step,
                               .summary = "each layer's gradient all-reduced on a communication stream as soon as an "
                                          "event says its GEMM is done (one layer per bucket)",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::overlap::v02
