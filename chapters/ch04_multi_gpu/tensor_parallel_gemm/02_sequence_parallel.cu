// ch04:tensor_parallel_gemm:02_sequence_parallel — Megatron-LM's sequence parallelism: each rank starts with
// its own 1/R of the tokens, all-gathers X before GEMM1 and reduce-scatters the partials after GEMM2, so that
// it ends with its own tokens' rows of Y (Korthikanti et al. 2022, section 4.2.2: its "g" operator, an
// all-gather forward, before the MLP, and "g-bar", a reduce-scatter forward, after it).
//
// What changed against 01: the all-reduce after GEMM2 becomes a reduce-scatter, and X arrives by an
// all-gather before GEMM1. Rank r's own tokens are [r T / R, (r + 1) T / R) of its X (the same rows the
// other ranks hold there, but the step reads no others: it gathers them), ncclAllGather puts every rank's
// rows into a gathered X in rank order (token order), the GEMMs run on it, and ncclReduceScatter (sum, bf16)
// hands block r of the partial, summed over ranks, to rank r: its own rows of Y. All on each rank's one
// stream, in order; each collective's calls for every rank in one group call (NCCL user guide, "Group
// Calls"). The offsets are reference.hpp's chunk_rows with one chunk, which the CPU tests replay.
// Why: an all-reduce is a reduce-scatter followed by an all-gather; sequence parallelism moves the all-gather
// of Y to before the next layer's GEMM, where it gathers X, so the bus bytes stay the same (R - 1)/R x 2 x
// 32 MiB. What it buys is not time: the LayerNorm and dropout around the MLP then run on 1/R of the tokens,
// and their activations take 1/R of the memory (Korthikanti et al.'s point). And it splits the
// communication into a part before the GEMMs and a part after them, which 03 overlaps with them.
// Napkin math (2 x H200, defaults; predictions, not measurements): the all-gather and the reduce-scatter
// each move 16 MiB of bus bytes, ~0.05 ms each at ~350 GB/s; the GEMMs as 01's, ~0.82 ms with the GELU:
// the step ~0.92 ms, as 01's (no significant difference expected; two collectives' fixed costs instead of
// one may add ~0.01 ms).
// Run: aisp bench run -t ch04:tensor_parallel_gemm:02_sequence_parallel --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"

namespace aisp::ch04::tensor_parallel_gemm::v02 {

class SequenceParallel {
 public:
  void setup(const Args& a, cudaStream_t) {
    const auto& api = nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    if (api.version < 21000 || !api.all_gather || !api.reduce_scatter) {
      throw VariantUnavailable("NCCL " + nccl::version_string(api) + " (" + api.path +
                               ") lacks bf16 reductions or all-gather/reduce-scatter: ch04:tensor_parallel_gemm "
                               "needs NCCL 2.10 or later");
    }
    m_streams.create(a.devices());
    m_mlp.create(a, a.shape.tokens, true);
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks()));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const auto& api = nccl::api();
    const std::size_t count = a.row(a.shape.tokens_per_rank());  // elements each rank sends, and receives
    m_streams.fork(stream);
    if (a.comms()) {
      nccl::check(api.group_start(), "ncclGroupStart");
      for (int r = 0; r < a.ranks(); ++r) {
        const ChunkRows c = chunk_rows(a.shape, 1, r, 0);
        nccl::check(api.all_gather(a.x[r] + a.row(c.gather_send), m_mlp.gathered(r) + a.row(c.gather_recv), count,
                                   ncclBfloat16, m_comms[r], m_streams.stream(r, stream)),
                    "ncclAllGather");
      }
      nccl::check(api.group_end(), "ncclGroupEnd");
    }
    if (a.gemms()) {
      // Phase 1 gathers nothing: the GEMMs read X where the all-gather would have put it, in token order.
      for (int r = 0; r < a.ranks(); ++r) {
        m_mlp.run(a, r, a.comms() ? m_mlp.gathered(r) : a.x[r], a.part[r], m_streams.stream(r, stream));
      }
    }
    if (a.comms()) {
      nccl::check(api.group_start(), "ncclGroupStart");
      for (int r = 0; r < a.ranks(); ++r) {
        const ChunkRows c = chunk_rows(a.shape, 1, r, 0);
        nccl::check(api.reduce_scatter(a.part[r] + a.row(c.scatter_send), a.y[r] + a.row(c.scatter_recv), count,
                                       ncclBfloat16, ncclSum, m_comms[r], m_streams.stream(r, stream)),
                    "ncclReduceScatter");
      }
      nccl::check(api.group_end(), "ncclGroupEnd");
    }
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args&) const { return {{"nccl", nccl::version_string(nccl::api())}}; }

 private:
  RankStreams m_streams;  // declared before m_comms: the communicators go first
  RankMlp m_mlp;
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(TensorParallelProblem, SequenceParallel, .step = 2, .slug = "sequence_parallel",
                               .kind = VariantKind::step,
                               .summary = "sequence parallelism: ncclAllGather of each rank's tokens of X, the GEMMs, "
                                          "then ncclReduceScatter of the partials, all on one stream",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::tensor_parallel_gemm::v02
