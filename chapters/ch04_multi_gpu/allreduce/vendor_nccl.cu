// ch04:allreduce:vendor_nccl — NCCL's all-reduce (ncclAllReduce), every rank in one group call: what
// nccl-tests' all_reduce_perf measures, and what PyTorch's torch.distributed.all_reduce calls.
//
// NCCL picks the algorithm (ring or tree), the protocol (LL, LL128, Simple) and the number of channels
// (thread blocks per GPU, each driving a slice of the buffer) per message size, and on NVLink its kernels
// push data into the neighbour's buffers. NVLink SHARP (NVLS) is off on these machines (NCCL_NVLS_ENABLE=0
// in the scripts; the lab never uses multicast). One process drives every rank: the communicators come
// from ncclCommInitAll, and each launch puts every rank's call between ncclGroupStart and ncclGroupEnd,
// as NCCL requires when one thread issues a collective for several GPUs (NCCL user guide, "Group Calls").
// NCCL is loaded at setup() (common/nccl_library.hpp): without it the step is SKIPPED, saying where it
// looked.
// Run: aisp bench run --targets ch04:allreduce:vendor_nccl
#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"

namespace aisp::ch04::allreduce::vnccl {

class NcclAllreduce {
 public:
  void setup(const Args& a, cudaStream_t) {
    nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    m_streams.create(a.devices());
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const auto& nccl_api = nccl::api();
    m_streams.fork(stream);
    nccl::check(nccl_api.group_start(), "ncclGroupStart");
    for (int r = 0; r < a.ranks; ++r) {
      nccl::check(nccl_api.all_reduce(a.in[r], a.out[r], a.n, ncclFloat32, ncclSum, m_comms[r],
                                      m_streams.stream(r, stream)),
                  "ncclAllReduce");
    }
    nccl::check(nccl_api.group_end(), "ncclGroupEnd");
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args&) const { return {{"nccl", nccl::version_string(nccl::api())}}; }

 private:
  RankStreams m_streams;  // declared before m_comms: the communicators go first
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(AllreduceProblem, NcclAllreduce, .step = 0, .slug = "nccl", .kind = VariantKind::vendor,
                               .summary = "ncclAllReduce on every rank in one group call (NCCL, loaded at run "
                                          "time)",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::allreduce::vnccl
