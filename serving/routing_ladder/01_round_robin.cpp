// ch17:routing:01_round_robin — each request to the next engine in turn (baseline).
//
// What: two engines (one per GPU, prefix caching on, ch16:serving's fastest settings) behind the router
// with `aisp route --policy round-robin`. The router looks at nothing: request i goes to engine i mod 2.
// Why it is the baseline: what a plain load balancer (nginx, a Kubernetes Service) does in front of
// several inference servers; right when requests are alike and caches do not matter.
// Napkin math (defaults: 16 tenants with 1,024-token system prompts = 64 blocks each, 1,280 blocks per
// engine, 32 running requests of ~14 blocks of their own): every engine sees every tenant, so each holds
// a working set of 16 x 64 = 1,024 prefix blocks beside ~450 running blocks, more than its 1,280. Idle
// tenants' prompts are evicted (LRU) and a request that finds its prompt gone prefills ~1,170 tokens
// instead of ~150; the blocks in use also cap how many requests run at once. Mixed lengths are not
// balanced: an engine that drew the long requests falls behind while still getting half of the rest.
// Run: aisp bench run --targets ch17:routing:01_round_robin
#include "serving/routing_ladder/problem.hpp"

namespace aisp::serving::routing_ladder::v01 {

class RoundRobin final : public RoutedStep {
 public:
  RoundRobin() : RoutedStep("round-robin") {}
};

AISP_REGISTER_STATEFUL_VARIANT(RoutingProblem, RoundRobin, .step = 1, .slug = "round_robin",
                               .kind = VariantKind::baseline,
                               .summary = "each request to the next engine in turn",
                               // peer_gpu: the second engine runs on the next GPU, declared for the audit
                               .features = {"multi_gpu", "peer_gpu"});

}  // namespace aisp::serving::routing_ladder::v01
