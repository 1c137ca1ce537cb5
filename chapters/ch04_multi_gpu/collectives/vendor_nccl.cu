// ch04:collectives:vendor_nccl — NCCL's collectives, every rank's call in one group call: what
// nccl-tests' all_gather_perf, reduce_scatter_perf, broadcast_perf, alltoall_perf and sendrecv_perf
// measure, and what torch.distributed's all_gather_into_tensor, reduce_scatter_tensor, broadcast,
// all_to_all_single and send/recv call.
//
// ncclAllGather, ncclReduceScatter (sum) and ncclBroadcast (root 0) for the first three ops. All-to-all
// and send/recv are ncclSend/ncclRecv pairs, as nccl-tests issues them (alltoall.cu on NCCL before 2.28,
// which calls ncclAlltoAll from there on; sendrecv.cu): rank r sends chunk j of its input to rank j and
// receives rank j's chunk r into its chunk j; for send/recv it sends its buffer to r + 1 and receives from
// r - 1. Every rank's calls go between one ncclGroupStart and ncclGroupEnd: one thread issues them for
// several GPUs, which NCCL requires to be grouped ("Group Calls: Management Of Multiple GPUs From One
// Thread"), and point-to-point calls that must progress together must be fused in one group, or they
// deadlock ("Point-to-point communication": "Sendrecv", "All-to-all"; NCCL user guide).
// NCCL picks the protocol and channels per size, and on NVLink its kernels push data into the peers'
// buffers; broadcast is a pipelined ring, so the root's link carries the buffer once. NVLS (multicast) is
// off on these machines (NCCL_NVLS_ENABLE=0 in the scripts). NCCL is loaded at setup()
// (common/nccl_library.hpp): without it, or with a library older than 2.7 (no send/recv), the step is
// SKIPPED, saying why.
// Run: aisp bench run --targets ch04:collectives:vendor_nccl
#include "chapters/ch04_multi_gpu/collectives/problem.hpp"
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"

namespace aisp::ch04::collectives::vnccl {

class NcclCollectives {
 public:
  void setup(const Args& a, cudaStream_t) {
    const auto& api = nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    if (!api.missing.empty()) {
      throw VariantUnavailable("NCCL " + nccl::version_string(api) + " (" + api.path + ") lacks " + api.missing +
                               ": ch04:collectives needs NCCL 2.7 or later");
    }
    m_streams.create(a.devices());
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks()));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const auto& api = nccl::api();
    m_streams.fork(stream);
    nccl::check(api.group_start(), "ncclGroupStart");
    for (int r = 0; r < a.ranks(); ++r) issue(api, a, r, m_streams.stream(r, stream));
    nccl::check(api.group_end(), "ncclGroupEnd");
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args&) const { return {{"nccl", nccl::version_string(nccl::api())}}; }

 private:
  // Rank r's calls; c is the count every call takes (layout.hpp).
  void issue(const nccl::Api& api, const Args& a, int r, cudaStream_t s) const {
    const Layout& l = a.layout;
    const std::size_t c = l.chunk;
    const ncclComm_t comm = m_comms[r];
    switch (l.op) {
      case Collective::all_gather:
        nccl::check(api.all_gather(a.in[r], a.out[r], c, ncclFloat32, comm, s), "ncclAllGather");
        break;
      case Collective::reduce_scatter:
        nccl::check(api.reduce_scatter(a.in[r], a.out[r], c, ncclFloat32, ncclSum, comm, s), "ncclReduceScatter");
        break;
      case Collective::broadcast:
        nccl::check(api.broadcast(a.in[r], a.out[r], c, ncclFloat32, 0, comm, s), "ncclBroadcast");
        break;
      case Collective::all_to_all:
        for (int j = 0; j < l.ranks; ++j) {
          const std::size_t at = static_cast<std::size_t>(j) * c;
          nccl::check(api.send(a.in[r] + at, c, ncclFloat32, j, comm, s), "ncclSend");
          nccl::check(api.recv(a.out[r] + at, c, ncclFloat32, j, comm, s), "ncclRecv");
        }
        break;
      case Collective::send_recv:
        nccl::check(api.send(a.in[r], c, ncclFloat32, right_of(r, l.ranks), comm, s), "ncclSend");
        nccl::check(api.recv(a.out[r], c, ncclFloat32, left_of(r, l.ranks), comm, s), "ncclRecv");
        break;
      case Collective::all_reduce:
      case Collective::reduce:
        throw std::logic_error("ch04:collectives: not one of this ladder's ops");
    }
  }

  RankStreams m_streams;  // declared before m_comms: the communicators go first
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(CollectivesProblem, NcclCollectives, .step = 0, .slug = "nccl",
                               .kind = VariantKind::vendor,
                               .summary = "ncclAllGather / ncclReduceScatter / ncclBroadcast, ncclSend+ncclRecv for "
                                          "all-to-all and send/recv, every rank in one group call (NCCL, loaded at "
                                          "run time)",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::collectives::vnccl
