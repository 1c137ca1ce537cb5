// ch18:speculative:01_greedy — plain greedy decoding: one token per sequence per target step (baseline).
//
// What: the batch's prompts are prefilled, then every step decodes one token for each sequence, replayed
// from a CUDA graph (the engine's fastest plain decode, ch16:llama_step). No drafts.
// Why it is the baseline: it is what the engine does without speculation, at its best.
// Napkin math (Llama-3.2-1B, 2.5 GB of bf16 weights): a decode step reads every weight once, ~0.6 ms at
// ~4 TB/s plus the launch and host costs the graph leaves; 128 tokens at batch 1 take ~128 steps. At
// batch 16 the step still reads the weights once, so the time per output token barely grows.
// Run: aisp bench run --targets ch18:speculative:01_greedy
#include "serving/speculative_ladder/problem.hpp"

namespace aisp::serving::speculative_ladder::v01 {

class Greedy {
 public:
  void setup(const Args& a, cudaStream_t stream) { launch(a, stream); }  // captures the graphs; facts read again after timing
  void launch(const Args& a, cudaStream_t stream) { m_last = run_requests(a, nullptr, stream); }
  std::vector<Fact> facts(const Args&) { return run_facts(m_last, false); }

 private:
  LadderRun m_last;
};

AISP_REGISTER_STATEFUL_VARIANT(SpeculativeProblem, Greedy, .step = 1, .slug = "greedy",
                               .kind = VariantKind::baseline,
                               .summary = "one token per sequence per target step, decode steps from CUDA graphs");

}  // namespace aisp::serving::speculative_ladder::v01
