// ch16:serving:01_static_batching — what a first server does: fixed batches, KV reserved up front.
//
// The engine forms a batch of up to max_running waiting requests, reserves each one's whole KV (prompt +
// max_tokens) at admission, prefills the batch, and decodes it until its *longest* member is done: a
// member that finished early stays in the batch as padding (its decode is computed and thrown away), and
// nobody joins until the whole batch is done. No prefill chunking: a prompt runs whole in one step.
// This is the shape of request-level batching (HF `generate` over a padded batch, FasterTransformer's
// static batches).
// What it costs: with output lengths uniform in [output/4, output], the batch's tail runs at a shrinking
// useful batch size, and the KV reserved for finished members sits idle until the batch ends.
// Napkin math: a batch lasts as long as its longest output (~the max of 64 uniform draws: ~output); the
// mean output is ~0.62 x output, so ~38% of decode slots are padding at a full batch.
// Run: aisp bench run --targets ch16:serving:01_static_batching
#include "serving/ladder/problem.hpp"

namespace aisp::serving::ladder::v01 {

void configure(SchedulerConfig& c) {
  c.policy = SchedulingPolicy::static_batch;
  c.kv_mode = KvMode::reserved;
  c.chunked_prefill = false;
}

class StaticBatching final : public EngineStep {
 public:
  StaticBatching() : EngineStep(&configure) {}
};

AISP_REGISTER_STATEFUL_VARIANT(ServingProblem, StaticBatching, .step = 1, .slug = "static_batching",
                               .kind = VariantKind::baseline,
                               .summary = "request-level batches run to their longest member, KV reserved for "
                                          "prompt + max_tokens, whole prompts");

}  // namespace aisp::serving::ladder::v01
