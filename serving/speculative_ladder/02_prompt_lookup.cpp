// ch18:speculative:02_prompt_lookup — drafts copied from the sequence itself (n-gram prompt lookup).
//
// What changed: before each target step, every sequence's last 1-3 tokens are searched for earlier in its
// prompt + output (longest n-gram first, the most recent match), and the k tokens that followed the match
// are proposed (Saxena 2023; transformers' prompt_lookup_num_tokens, vLLM's ngram proposer). The target
// verifies the last token and the k drafts in one step (k + 1 rows, an argmax after each): the drafts
// matching its own argmaxes are kept, plus its token at the first mismatch (serving/speculative.hpp).
// A sequence with no match decodes plainly in the same step.
// Why it helps: drafting costs a scan on the host, no GPU work; a verification step reads the weights
// once, like a decode, and yields 1 + accepted tokens.
// What it costs: a verification runs eagerly (k + 1 rows per sequence is not the decode graphs' shape)
// and its rows cost FLOPs that grow with the batch; drafts that miss are wasted rows.
// Run: aisp bench run --targets ch18:speculative:02_prompt_lookup
#include "serving/speculative_ladder/problem.hpp"

namespace aisp::serving::speculative_ladder::v02 {

class PromptLookup {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    m_drafter = std::make_unique<PromptLookupDrafter>(PromptLookupOptions{.num_draft = a.num_draft});
    launch(a, stream);
  }
  void launch(const Args& a, cudaStream_t stream) { m_last = run_requests(a, m_drafter.get(), stream); }
  std::vector<Fact> facts(const Args&) { return run_facts(m_last, true); }

 private:
  std::unique_ptr<PromptLookupDrafter> m_drafter;
  LadderRun m_last;
};

AISP_REGISTER_STATEFUL_VARIANT(SpeculativeProblem, PromptLookup, .step = 2, .slug = "prompt_lookup",
                               .kind = VariantKind::step,
                               .summary = "k drafts from n-gram matches in the sequence, verified in one target step");

}  // namespace aisp::serving::speculative_ladder::v02
