// ch15:disaggregated:02_disaggregated — prefill on this GPU, decode on the next, the KV blocks moved
// between them (optimized).
//
// What changed: one DisaggregatedEngine (serving/disaggregated.hpp) over the two runners instead of two
// engines. This GPU's engine only computes prompts; when a prompt's first token is sampled, its KV
// blocks move into the next GPU's pool (ch15:kv_transfer step 03's kernel, run there over the peer
// mapping) and that GPU's engine decodes it to the end.
// Why it should help: no decode step ever carries a prefill chunk, so TPOT is the decode engine's alone
// and no longer depends on the prompts' arrival rate; the prefill engine's steps are all prompt tokens,
// the GPU's best case for arithmetic intensity. The costs: the move (a 16-token block is 2 MiB for the 8B
// shape, 256 KiB for the 1B, over a link of ~390 GB/s: ~5 and ~0.7 us a block), one GPU's worth of decode
// capacity and one of prefill capacity instead of two mixed ones, so a workload whose phases are not
// balanced leaves one GPU idler than the other (the makespan shows it).
// Napkin math: TPOT p99 should fall toward TPOT p50 (no stretched steps); TTFT may rise where one GPU's
// prefill capacity is short of the arrival rate; goodput under a tight TPOT SLO is what should move.
// Run: aisp bench run --targets ch15:disaggregated:02_disaggregated
#include "serving/disaggregated_ladder/problem.hpp"

namespace aisp::serving::disaggregated_ladder::v02 {

class Disaggregated final : public LayoutStep {
 public:
  Disaggregated() : LayoutStep(Layout::disaggregated) {}
};

AISP_REGISTER_STATEFUL_VARIANT(DisaggregatedProblem, Disaggregated, .step = 2, .slug = "disaggregated",
                               .kind = VariantKind::optimized,
                               .summary = "prefill on this GPU, decode on the next, KV blocks moved between them",
                               // peer_gpu: the decode engine and the K/V move run on the next GPU
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::serving::disaggregated_ladder::v02
