// ch16:serving:03_paged_kv — KV blocks on demand instead of a reservation for the longest outcome.
//
// What changed: a sequence holds only the 16-token blocks its tokens fill so far (vLLM's PagedAttention,
// SOSP '23); a new block is taken when the last one fills. When the pool runs dry, the newest running
// sequence is preempted (its blocks freed, recomputed later from its prompt and the tokens it generated).
// Why it helps: a reservation holds max_tokens of KV from the first step, though on average a sequence is
// half way through its output; paged KV admits more sequences into the same pool, so decode batches are
// larger while memory binds (at the defaults: 1,024 blocks against ~1,500 needed in all).
// What it costs: preemption recomputes prefixes when the pool overflows (reported as a fact).
// Run: aisp bench run --targets ch16:serving:03_paged_kv
#include "serving/ladder/problem.hpp"

namespace aisp::serving::ladder::v03 {

void configure(SchedulerConfig& c) {
  c.policy = SchedulingPolicy::continuous;
  c.kv_mode = KvMode::paged;
  c.chunked_prefill = false;
}

class PagedKv final : public EngineStep {
 public:
  PagedKv() : EngineStep(&configure) {}
};

AISP_REGISTER_STATEFUL_VARIANT(ServingProblem, PagedKv, .step = 3, .slug = "paged_kv", .kind = VariantKind::step,
                               .summary = "continuous batching with KV blocks taken as tokens arrive, preemption "
                                          "by recomputation when the pool runs dry");

}  // namespace aisp::serving::ladder::v03
