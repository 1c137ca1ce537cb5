// ch17:routing:02_least_tokens — each request to the engine with the fewest outstanding tokens.
//
// What changed: `--policy least-tokens`. The router counts, per engine, prompt + max_tokens of the
// requests it sent there that have not finished (the work each engine has been promised; the router
// cannot see an engine's own queue) and sends the next request to the lightest.
// Why it should help: with user messages from 32 to 256 tokens and outputs from 16 to 128, equal request
// counts are unequal work; an engine that drew long ones gets fewer new ones until it catches up, so
// neither queue grows while the other idles, and the tail of TTFT shortens.
// What it cannot do: it knows nothing of the caches. Each engine still sees every tenant, and the
// working set per engine is round robin's (01's napkin math): the misses stay. Expected: a small gain on
// the makespan and TTFT p99 (the cap of 96 in flight already keeps both engines busy), not more.
// Run: aisp bench run --targets ch17:routing:02_least_tokens
#include "serving/routing_ladder/problem.hpp"

namespace aisp::serving::routing_ladder::v02 {

class LeastTokens final : public RoutedStep {
 public:
  LeastTokens() : RoutedStep("least-tokens") {}
};

AISP_REGISTER_STATEFUL_VARIANT(RoutingProblem, LeastTokens, .step = 2, .slug = "least_tokens",
                               .kind = VariantKind::step,
                               .summary = "each request to the engine with the fewest outstanding tokens",
                               // peer_gpu: the second engine runs on the next GPU, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::serving::routing_ladder::v02
