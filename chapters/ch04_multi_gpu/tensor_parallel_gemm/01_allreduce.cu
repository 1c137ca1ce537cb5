// ch04:tensor_parallel_gemm:01_allreduce — Megatron-LM's tensor-parallel MLP as the paper gives it: every rank
// holds all of X, runs its column-parallel GEMM1, the GELU and its row-parallel GEMM2, then one all-reduce
// sums the partials, so that every rank holds Y (Shoeybi et al. 2019, section 3, figure 3a: the MLP's "g"
// operator).
//
// What it does: on each rank's stream, GEMM1 H = X W1_r^T (tokens x f), GELU in place, GEMM2
// partial = G W2_r^T (tokens x hidden), then ncclAllReduce (sum, bf16, out of place: partial -> Y) on the same
// stream, so that it starts only when that rank's GEMM2 is done. Every rank's all-reduce goes in one group
// call (NCCL user guide, "Group Calls": one thread issuing a collective for several GPUs must group them).
// bf16 partials on the wire, as Megatron-LM all-reduces them: half the bytes of fp32 partials, and each of
// NCCL's additions rounds to bf16 (reference.hpp's tolerance counts those roundings). Each rank ends with
// all of Y; the gate checks its own tokens' rows of it (the output the sequence-parallel steps define).
// Why it is the baseline: nothing overlaps, so the step costs the GEMMs' time plus the all-reduce's: the
// links idle during the GEMMs, the tensor cores during the all-reduce.
// Napkin math (2 x H200 over NVLink, defaults tokens = hidden = 4096, ffn = 16384; predictions, not
// measurements): each rank's GEMMs are 4 x 4096 x 4096 x 8192 = 550 GFLOP, ~0.79 ms at ~700 TFLOP/s, the GELU
// ~0.03 ms; the all-reduce of 32 MiB of bf16 partials moves 32 MiB x 2 (R - 1) / R = 32 MiB of bus bytes,
// ~0.1 ms at ~350 GB/s; the step ~0.92 ms, of which ~10% is exposed communication.
// Run: aisp bench run -t ch04:tensor_parallel_gemm:01_allreduce --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"

namespace aisp::ch04::tensor_parallel_gemm::v01 {

class AllReduce {
 public:
  void setup(const Args& a, cudaStream_t) {
    const auto& api = nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    if (api.version < 21000) {
      throw VariantUnavailable("NCCL " + nccl::version_string(api) + " (" + api.path +
                               ") has no bf16 reductions: ch04:tensor_parallel_gemm needs NCCL 2.10 or later");
    }
    m_streams.create(a.devices());
    m_mlp.create(a, a.shape.tokens, false);
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks()));
  }

  void launch(const Args& a, cudaStream_t stream) {
    m_streams.fork(stream);
    if (a.gemms()) {
      for (int r = 0; r < a.ranks(); ++r) m_mlp.run(a, r, a.x[r], a.part[r], m_streams.stream(r, stream));
    }
    if (a.comms()) {
      const auto& api = nccl::api();
      nccl::check(api.group_start(), "ncclGroupStart");
      for (int r = 0; r < a.ranks(); ++r) {
        nccl::check(api.all_reduce(a.part[r], a.y[r], a.shape.activation_elements(), ncclBfloat16, ncclSum,
                                   m_comms[r], m_streams.stream(r, stream)),
                    "ncclAllReduce");
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

AISP_REGISTER_STATEFUL_VARIANT(TensorParallelProblem, AllReduce, .step = 1, .slug = "allreduce",
                               .kind = VariantKind::baseline,
                               .summary = "each rank's GEMM1, GELU and GEMM2 on replicated X, then one ncclAllReduce "
                                          "of the bf16 partials on the same stream (no overlap)",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::tensor_parallel_gemm::v01
