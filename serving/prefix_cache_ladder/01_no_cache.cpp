// ch17:prefix_cache:01_no_cache — every prompt prefilled from its first token (baseline).
//
// What: ch16:serving's fastest engine (continuous batching, paged KV, chunked prefill, CUDA-graph decode
// steps) serving the chats turn by turn. A sequence's KV blocks go back to the pool when it finishes, so
// turn t + 1 recomputes the system prompt and the whole history turn t had just computed.
// Why it is the baseline: the engine as ch16 built it; nothing is recomputed on purpose, it is simply not
// remembered.
// Napkin math (defaults: 32 chats, 4 turns, a 1,024-token system prompt, user messages up to 128 and
// answers up to 64 tokens): the prompts average ~1,300 tokens and the answers ~40, so ~97% of the tokens
// computed are prefill, and most of that prefill was computed before.
// Run: aisp bench run --targets ch17:prefix_cache:01_no_cache
#include "serving/prefix_cache_ladder/problem.hpp"

namespace aisp::serving::prefix_cache_ladder::v01 {

class NoCache {
 public:
  void setup(const Args& a, cudaStream_t stream) { launch(a, stream); }  // captures graphs; facts are read again after timing
  void launch(const Args& a, cudaStream_t stream) { m_last = serve_conversations(a, false, stream); }
  std::vector<Fact> facts(const Args&) { return launch_facts(m_last, false); }

 private:
  LaunchFacts m_last;
};

AISP_REGISTER_STATEFUL_VARIANT(PrefixCacheProblem, NoCache, .step = 1, .slug = "no_cache",
                               .kind = VariantKind::baseline,
                               .summary = "ch16:serving's engine: every turn's prompt prefilled in full");

}  // namespace aisp::serving::prefix_cache_ladder::v01
