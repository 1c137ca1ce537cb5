// ch16:serving:04_chunked_prefill — prompts cut into chunks that share steps with the decodes.
//
// What changed: a step's token budget (token_budget) is filled with the running decodes first, then with
// prompt chunks (Sarathi-Serve, OSDI '24; vLLM's chunked prefill): a long prompt is spread over several
// steps instead of landing in one.
// Why it helps: steps stay about the same size, so decodes are not stalled behind a whole prompt, and the
// GEMMs of a mixed step see more rows than a decode alone (a decode-only step of 64 rows is bound by the
// weight reads; chunk tokens ride along almost free).
// What it costs: a prompt's attention runs once per chunk over the cached prefix (a little more work than
// one pass), and a prompt's first token comes a few steps later under load.
// Run: aisp bench run --targets ch16:serving:04_chunked_prefill
#include "serving/ladder/problem.hpp"

namespace aisp::serving::ladder::v04 {

void configure(SchedulerConfig& c) {
  c.policy = SchedulingPolicy::continuous;
  c.kv_mode = KvMode::paged;
  c.chunked_prefill = true;
}

class ChunkedPrefill final : public EngineStep {
 public:
  ChunkedPrefill() : EngineStep(&configure) {}
};

AISP_REGISTER_STATEFUL_VARIANT(ServingProblem, ChunkedPrefill, .step = 4, .slug = "chunked_prefill",
                               .kind = VariantKind::step,
                               .summary = "continuous batching, paged KV, prompts chunked into each step's token "
                                          "budget beside the decodes");

}  // namespace aisp::serving::ladder::v04
