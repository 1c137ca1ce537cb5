// ch16:serving:02_continuous_batching — iteration-level scheduling: retire and admit at every step.
//
// What changed: the scheduler decides per engine step (Orca, OSDI '22): a sequence that reaches its
// max_tokens leaves the batch at once and gives its KV back, and a waiting request is admitted in the same
// step if KV and the batch limit allow. KV is still reserved for prompt + max_tokens at admission, and
// prompts still run whole.
// Why it helps: no padding decodes, and the batch stays full while requests wait: the decode steps' cost
// is spread over more useful tokens (a decode step of a small model costs about the same at batch 8 and
// 32: it reads the weights once either way).
// What it leaves: a new request's whole prompt lands in one step with the running decodes, which stretches
// that step (every running sequence waits for the prefill); and reserved KV limits how many run at once.
// Run: aisp bench run --targets ch16:serving:02_continuous_batching
#include "serving/ladder/problem.hpp"

namespace aisp::serving::ladder::v02 {

void configure(SchedulerConfig& c) {
  c.policy = SchedulingPolicy::continuous;
  c.kv_mode = KvMode::reserved;
  c.chunked_prefill = false;
}

class ContinuousBatching final : public EngineStep {
 public:
  ContinuousBatching() : EngineStep(&configure) {}
};

AISP_REGISTER_STATEFUL_VARIANT(ServingProblem, ContinuousBatching, .step = 2, .slug = "continuous_batching",
                               .kind = VariantKind::step,
                               .summary = "iteration-level batching: finished sequences leave, waiting ones join "
                                          "every step (KV still reserved, whole prompts)");

}  // namespace aisp::serving::ladder::v02
