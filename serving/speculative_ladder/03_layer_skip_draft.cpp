// ch18:speculative:03_layer_skip_draft — drafts from the target's own first layers.
//
// What changed: the drafter is a model: the target cut after its first draft_layers layers, then its
// final norm and lm_head (RunnerOptions::num_layers; the early-exit draft of LayerSkip, Elhoushi et al.
// 2024, without the training that makes early exits accurate). It keeps its own KV cache; each round it
// catches up on the tokens the target accepted, then decodes k tokens greedily (its decode steps replayed
// from CUDA graphs), and the target verifies them in one step (serving/speculative.hpp, ModelDrafter).
// Why it may help: a draft token costs draft_layers / layers of a decode step (4 / 16 at the defaults on
// Llama-3.2-1B), so k drafts cost about one target step; with acceptance a, a verification yields
// (1 - a^(k+1)) / (1 - a) tokens.
// What it costs: k draft steps and a catch-up step per round, whatever is accepted: it loses when the
// acceptance is low. How often a shallow draft agrees with the full model is the whole question, and on
// random weights it is measured here, not assumed (the acceptance fact).
// Run: aisp bench run --targets ch18:speculative:03_layer_skip_draft
#include "serving/speculative_ladder/problem.hpp"

namespace aisp::serving::speculative_ladder::v03 {

class LayerSkipDraft {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    a.draft->set_cuda_graphs(true);
    m_drafter = std::make_unique<ModelDrafter>(*a.draft);
    launch(a, stream);
  }
  void launch(const Args& a, cudaStream_t stream) { m_last = run_requests(a, m_drafter.get(), stream); }
  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> f = run_facts(m_last, true);
    f.push_back({"draft_layers", std::to_string(a.draft->config().num_hidden_layers) + " of " +
                                     std::to_string(a.target->config().num_hidden_layers)});
    return f;
  }

 private:
  std::unique_ptr<ModelDrafter> m_drafter;
  LadderRun m_last;
};

AISP_REGISTER_STATEFUL_VARIANT(SpeculativeProblem, LayerSkipDraft, .step = 3, .slug = "layer_skip_draft",
                               .kind = VariantKind::step,
                               .summary = "k drafts from the target's first layers (early exit), verified in one "
                                          "target step");

}  // namespace aisp::serving::speculative_ladder::v03
