// ch17:prefix_cache:02_prefix_cache — KV blocks of prefixes already computed are reused.
//
// What changed: SchedulerConfig::prefix_cache (serving/prefix_cache.hpp). A full 16-token block, once
// computed, is indexed by a hash chained over every token before it and stays in the pool after its
// sequence finishes (evictable, least recently used first). A new sequence takes the longest run of
// cached blocks that matches its tokens (tokens and parent verified on lookup: a hash collision is a miss)
// and starts computing after them (vLLM's automatic prefix caching; SGLang's RadixAttention shares the
// idea with a radix tree).
// Why it helps: the system prompt is computed once per launch, and each later turn finds its whole history
// cached (the prompt and answer of the turn before) and computes only its new user message: TTFT falls with
// the prefill it skips.
// What it costs: hashing each full block on the host; cached blocks occupy the pool until evicted (when the
// pool is short, eviction takes the cache's benefit away: axis kv_blocks); chats submitted in the same step
// as the first one to compute a shared block cannot use it yet.
// Run: aisp bench run --targets ch17:prefix_cache:02_prefix_cache
#include "serving/prefix_cache_ladder/problem.hpp"

namespace aisp::serving::prefix_cache_ladder::v02 {

class PrefixCache {
 public:
  void setup(const Args& a, cudaStream_t stream) { launch(a, stream); }  // captures graphs; facts are read again after timing
  void launch(const Args& a, cudaStream_t stream) { m_last = serve_conversations(a, true, stream); }
  std::vector<Fact> facts(const Args&) { return launch_facts(m_last, true); }

 private:
  LaunchFacts m_last;
};

AISP_REGISTER_STATEFUL_VARIANT(PrefixCacheProblem, PrefixCache, .step = 2, .slug = "prefix_cache",
                               .kind = VariantKind::optimized,
                               .summary = "cached prefixes' KV blocks reused: each turn computes only what is new");

}  // namespace aisp::serving::prefix_cache_ladder::v02
