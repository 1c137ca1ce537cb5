// ch18:speculative:04_fp8_draft — drafts from the whole target with FP8 weights.
//
// What changed: the draft model is no longer the target's first layers but all of them, with the five
// Linear weights of every layer stored as FP8 e4m3 with a scale per output channel, the activations
// quantized per token before each of those GEMMs, and the embedding, lm_head, norms, attention and KV cache
// kept in bf16 (RunnerOptions::fp8_weights; serving/gpu/fp8_gemm.hpp). Everything else is step 03's:
// ModelDrafter keeps the draft's own KV cache, catches up on the tokens the target accepted, decodes k
// tokens greedily from CUDA graphs, and the target verifies them in one step.
// Why it may help: the draft computes the target's function with every weight rounded to 4 significant
// bits and a per-channel scale, so its argmax differs from the target's only where that rounding moves
// the top two logits past each other: near-ties. Acceptance should be high by construction, unlike step
// 03's early exit on random weights (the acceptance fact says how high). And decode at a small batch is
// weight-bandwidth bound: FP8 Linear weights are half the bytes of bf16 ones.
// What it costs: per round, k draft steps plus a catch-up step and the verification, as step 03; each FP8
// GEMM adds a per-token quantization launch; the bf16 lm_head and embedding do not shrink.
// Napkin math (Llama-3.2-1B: 2.47 GB of bf16 weights, of which the tied embedding / lm_head is 0.53 GB):
// a draft step reads 0.53 + 1.94 / 2 = 1.5 GB, ~0.6 of a target step (Llama-3-8B, untied: its 14 GB of
// Linear weights become 7 GB beside the 1.05 GB lm_head, ~0.55). With acceptance a = 0.95 and k = 4 a
// verification yields (1 - a^5) / (1 - a) = 4.5 tokens for 4 x 0.6 + a catch-up (~0.6) + an eager
// verification (~1.1, assumed: k + 1 rows and no graph) = ~4.1 target-step times, against 4.5 plain decode
// steps: at best a small win at batch 1, a loss where acceptance or the draft step's bandwidth falls short
// of this. Measured, not assumed: this comment predicts, the results table decides.
// Run: aisp bench run --targets ch18:speculative:04_fp8_draft
#include "core/base/error.hpp"
#include "serving/speculative_ladder/problem.hpp"

namespace aisp::serving::speculative_ladder::v04 {

class Fp8Draft {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    LlamaRunner* draft = nullptr;
    try {
      draft = &a.fp8_draft();
    } catch (const UsageError& e) {  // cuBLASLt offers no FP8 GEMM with these scales on this machine
      throw VariantUnavailable(e.what());
    }
    draft->set_cuda_graphs(true);
    m_drafter = std::make_unique<ModelDrafter>(*draft);
    launch(a, stream);
  }
  void launch(const Args& a, cudaStream_t stream) { m_last = run_requests(a, m_drafter.get(), stream); }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f = run_facts(m_last, true);
    f.push_back({"draft", "all layers, FP8 e4m3 Linear weights (per-channel scales), bf16 embedding and lm_head"});
    return f;
  }

 private:
  std::unique_ptr<ModelDrafter> m_drafter;
  LadderRun m_last;
};

// sm_90: cuBLASLt's outer-vector FP8 scaling (per token x per channel) is offered on Hopper.
AISP_REGISTER_STATEFUL_VARIANT(SpeculativeProblem, Fp8Draft, .step = 4, .slug = "fp8_draft",
                               .kind = VariantKind::step,
                               .summary = "k drafts from the whole target with FP8 Linear weights, verified in one "
                                          "target step",
                               .min_cc = 90);

}  // namespace aisp::serving::speculative_ladder::v04
