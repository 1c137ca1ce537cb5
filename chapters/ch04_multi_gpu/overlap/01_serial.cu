// ch04:overlap:01_serial — backward first, then one all-reduce of every gradient: the data-parallel step a
// first attempt writes (loss.backward(), then all_reduce over one flat gradient buffer), and what DDP does
// with no buckets.
//
// What it does: each rank runs its L weight-gradient GEMMs (last layer first) on its own stream, then one
// ncclAllReduce (sum, fp32, out of place: grad -> out) over all L layers' gradients, on the same stream,
// so it starts only when that rank's last GEMM is done. Every rank's all-reduce goes in one group call
// (NCCL user guide, "Group Calls": one thread issuing a collective for several GPUs must group them).
// Why it is the baseline: nothing overlaps, so the step costs the GEMMs' time plus the all-reduce's: the
// links idle for the whole backward pass, and the tensor cores for the whole all-reduce.
// Napkin math (2 x H200 over NVLink, defaults L = 16, hidden = tokens = 4096; predictions, not
// measurements): GEMMs 16 x 2 x 4096^3 = 2.2 TFLOP at ~700 TFLOP/s ~ 3.1 ms; all-reduce of 1 GiB of fp32
// gradients, bus bytes 1 GiB x 2 (R - 1) / R = 1 GiB at ~350 GB/s ~ 3.1 ms; the step ~ 6.2 ms, the sum.
// Run: aisp bench run -t ch04:overlap:01_serial --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap::v01 {

class Serial {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_streams.create(a.devices());
    m_gemms.create(a);
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks));
  }

  void launch(const Args& a, cudaStream_t stream) {
    m_streams.fork(stream);
    if (a.gemms()) {
      for (int l = a.shape.layers - 1; l >= 0; --l) {
        for (int r = 0; r < a.ranks; ++r) m_gemms.run(a, r, l, m_streams.stream(r, stream));
      }
    }
    if (a.reduces()) {
      const auto& api = nccl::api();
      const Bucket all{0, a.shape.layers};
      nccl::check(api.group_start(), "ncclGroupStart");
      for (int r = 0; r < a.ranks; ++r) {
        nccl::check(api.all_reduce(a.grad_of(r, all), a.out_of(r, all), a.count_of(all), ncclFloat32, ncclSum,
                                   m_comms[r], m_streams.stream(r, stream)),
                    "ncclAllReduce");
      }
      nccl::check(api.group_end(), "ncclGroupEnd");
    }
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args&) const {
    return {{"nccl", nccl::version_string(nccl::api())}, {"buckets", "1"}};
  }

 private:
  RankStreams m_streams;  // declared before m_comms: the communicators go first
  RankGemms m_gemms;
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, Serial, .step = 1, .slug = "serial", .kind = VariantKind::baseline,
                               .summary = "every wgrad GEMM, then one ncclAllReduce of all gradients on the same "
                                          "stream (no overlap)",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::overlap::v01
