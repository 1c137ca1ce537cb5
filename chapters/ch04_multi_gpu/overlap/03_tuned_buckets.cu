// ch04:overlap:03_tuned_buckets — layers merged into buckets of a size target (axis bucket_mb, PyTorch
// DDP's bucket_cap_mb, default 25 MiB as there): fewer, larger all-reduces.
//
// What changed against 02: the bucket assignment, and nothing else. Gradients join the open bucket in the
// order backward produces them, and it closes as soon as it holds at least the cap (reference.hpp,
// assign_buckets: DDP's rule, reducer.cpp compute_bucket_assignment_by_size), the first bucket already at
// 1 MiB as in DDP, so that the first all-reduce starts after the first layer (of 1 MiB or more) whatever
// the cap.
// The trade-off: each all-reduce costs a fixed part (a group call and an NCCL kernel launch, its handshake
// with the peers, the ring's latency of a few microseconds per step) and runs below the link's rate until
// it is several MiB long; fewer, larger buckets pay that less often and run nearer the link's rate. But a
// bucket can start only when its last layer's GEMM is done: the larger the buckets, the longer each waits
// for its last layer, and the larger the last bucket, whose all-reduce nothing hides. Small layers
// (many short all-reduces, latency-bound) gain; large ones lose.
// Napkin math (2 x H200; predictions, not measurements): at the defaults each layer's gradient is 64 MiB,
// already more than the 25 MiB cap, so every bucket is one layer, as in 02 (the report should show no
// significant difference). With hidden = 2048 and 32 layers (16 MiB each; GEMMs ~50 us, all-reduces of
// 16 MiB ~48 us at ~350 GB/s plus ~10-20 us of fixed cost each), 02's 32 all-reduces take ~2 ms against
// ~1.6 ms of GEMMs and fall behind; at 25 MiB 03 issues 17 (one layer, fifteen pairs of 32 MiB, one
// layer), half the fixed costs, with a last bucket of one layer. (Much smaller layers make the host the
// limit: a group call per bucket and a cuBLASLt call per layer and rank, tens of microseconds each.)
// Run: aisp bench run -t ch04:overlap:03_tuned_buckets --axis bucket_mb=25,64,256,1024 --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/common/comm_streams.hpp"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap::v03 {

class TunedBuckets {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_buckets = assign_buckets(a.shape.layers, a.shape.layer_bytes(), a.bucket_bytes);
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

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, TunedBuckets, .step = 3, .slug = "tuned_buckets",
                               .kind = VariantKind::step,
                               .summary = "02 with layers merged into buckets of at least bucket_mb MiB (DDP's rule; "
                                          "first bucket 1 MiB): fewer, larger all-reduces",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::overlap::v03
