// ch17:routing:03_prefix_locality — a tenant's requests to the engine that holds its system prompt.
//
// What changed: `--policy prefix`. The router hashes each prompt's first block (16 ids: here, the start
// of the tenant's system prompt) and sends it to the engine that served that prefix last, while that
// engine's outstanding tokens stay within `load_bound` (4,096) of the lightest engine's; a prefix not
// seen, or one whose engine is beyond the bound, goes to the lightest (step 02) and is remembered there.
// (SGLang's cache-aware router, llm-d's prefix-aware scorer: the same idea.)
// Why it should help: each tenant lives on one engine, so each engine's working set is half the tenants'
// prompts: 8 x 64 = 512 blocks beside ~450 running ones, which fits its 1,280. After the first request of
// a tenant, its prompt stays cached: a request prefills ~150 tokens instead of ~1,170 whenever step 01
// would have missed, and the blocks freed let more requests run at once. Each system prompt is also
// computed on one engine only, not on both.
// What it costs: a hash of 16 ids per request, and balance: uniform tenants split about evenly, but a
// hot tenant would pile onto one engine until the load bound spills it (then its prompt is computed on
// the other engine too).
// Run: aisp bench run --targets ch17:routing:03_prefix_locality
#include "serving/routing_ladder/problem.hpp"

namespace aisp::serving::routing_ladder::v03 {

class PrefixLocality final : public RoutedStep {
 public:
  PrefixLocality() : RoutedStep("prefix") {}
};

AISP_REGISTER_STATEFUL_VARIANT(RoutingProblem, PrefixLocality, .step = 3, .slug = "prefix_locality",
                               .kind = VariantKind::optimized,
                               .summary = "a tenant's requests to the engine holding its system prompt, within a "
                                          "load bound",
                               // peer_gpu: the second engine runs on the next GPU, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::serving::routing_ladder::v03
