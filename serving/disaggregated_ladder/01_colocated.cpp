// ch15:disaggregated:01_colocated — two engines, one per GPU, each prefilling and decoding its own
// requests (baseline).
//
// What: two EngineLoops (ch16:serving's fastest settings) behind the router with round robin: request i
// to GPU i mod 2, as two `aisp serve` processes behind `aisp route`.
// Why it is the baseline: what scaling out one engine gives. Each engine's steps mix prefill chunks with
// the decodes of its running requests: a prompt that joins a step stretches it for every sequence
// decoding in it (chunked prefill bounds the stretch to a token_budget chunk, it does not remove it), so
// TPOT rises with the prompts' arrival rate, and TTFT waits behind the decodes the budget serves first.
// Napkin math: a step's time grows with its prefill tokens; with prompts of ~1,150 tokens on average
// arriving at `rate` / 2 per engine, a growing share of an engine's steps carry a chunk, and those steps
// are the TPOT tail (p99); the measurement decides by how much.
// Run: aisp bench run --targets ch15:disaggregated:01_colocated
#include "serving/disaggregated_ladder/problem.hpp"

namespace aisp::serving::disaggregated_ladder::v01 {

class Colocated final : public LayoutStep {
 public:
  Colocated() : LayoutStep(Layout::colocated) {}
};

AISP_REGISTER_STATEFUL_VARIANT(DisaggregatedProblem, Colocated, .step = 1, .slug = "colocated",
                               .kind = VariantKind::baseline,
                               .summary = "two engines, one per GPU, requests split between them",
                               // peer_gpu: the second engine runs on the next GPU, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::serving::disaggregated_ladder::v01
