// ch04:overlap:05_sm_margin — 04 with its GEMMs planned for fewer SMs than the GPU has, so that NCCL's
// kernels find SMs free instead of waiting for a GEMM's blocks to drain.
//
// What changed against 04: one argument. Every rank's cuBLASLt plan is made with
// CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - sm_margin (wgrad_gemm.hpp; cuBLASLt's documentation of the
// attribute: "optimizes heuristics for execution on a different number of SMs when user expects a concurrent
// stream to be using some of the device resources"), what Transformer Engine does for its communication
// overlap. The GEMM's grid is then sized for the smaller GPU, so while it runs `sm_margin` SMs have no GEMM
// block to run and an all-reduce released by an event starts at once, beside it.
// Why it should help: stream priority (04) orders pending blocks but never preempts running ones; a GEMM
// whose grid covers every SM holds them all until its last wave ends, and NCCL's blocks start only as
// that wave drains. With the margin they never wait, and the all-reduce's bandwidth is spread over the whole
// GEMM instead of squeezed between GEMMs.
// What it costs: the GEMMs run on fewer SMs when nothing else does (phase 1 shows it: about sm_margin / SMs
// slower, more where the tile count divides worse), and an all-reduce that needs more blocks than the margin
// still competes for the rest. The sweep `--axis sm_margin=8,16,32` finds the balance.
// Napkin math (2 x H200, defaults; predictions, not measurements): 04 measured 4.90 ms against a serial
// 6.22 ms, about a third of the ~3.1 ms all-reduce hidden. If waiting for SMs is what exposes the rest,
// the ideal is max(GEMMs, all-reduce) + one layer's all-reduce: GEMMs 3.1 ms x 132 / 116 = 3.5 ms plus
// ~0.2 ms, so t0 near 3.7 ms; if the all-reduce's DRAM traffic slowing the GEMMs is the limit instead, the
// margin buys nothing and costs the GEMMs' 12%.
// Run: aisp bench run -t ch04:overlap:04_priority_comm,ch04:overlap:05_sm_margin --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/comm_streams.hpp"
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap::v05 {

class SmMargin {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_buckets = assign_buckets(a.shape.layers, a.shape.layer_bytes(), a.bucket_bytes);
    m_streams.create(a.devices());
    m_comm_streams.create(a.devices(), m_buckets.size(), true);
    m_gemm_sms = std::max(1, a.sm_count - a.sm_margin);
    m_gemms.create(a, m_gemm_sms);
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
    return {{"nccl", nccl::version_string(nccl::api())},
            {"buckets", std::to_string(m_buckets.size())},
            {"gemm_sms", std::to_string(m_gemm_sms)}};
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
  int m_gemm_sms = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, SmMargin, .step = 5, .slug = "sm_margin", .kind = VariantKind::step,
                               .summary = "04 with every GEMM planned for all but sm_margin SMs "
                                          "(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET): NCCL's blocks never wait for "
                                          "a GEMM to drain",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::overlap::v05
