// ch18:speculative — speculative decoding on the serving engine's runner: the same batch of requests
// decoded greedily token by token (baseline), then with drafts verified k + 1 tokens per target step
// (serving/speculative.hpp): drafts from prompt lookup (n-gram matches in the sequence itself), then from a
// draft model that is the target cut after its first `draft_layers` layers (RunnerOptions::num_layers: a
// layer-skipping draft that shares the vocabulary, the embedding and the lm_head by construction), then
// from the whole target with FP8 Linear weights (RunnerOptions::fp8_weights: the same model, half the
// weight bytes per step, agreeing with the target except where FP8 rounding flips a near-tie).
//
// Why it can pay: at a small batch a decode step reads every weight to produce one token per sequence; a
// verification step reads them once to check k drafts and produce up to k + 1 tokens. It costs the
// drafts (a draft model's steps; nothing on the GPU for prompt lookup) and the verification's extra rows,
// and it wins only when enough drafts are accepted: tokens per verification x decode step time must
// exceed the verification plus the drafting. At large batches a decode step is no longer weight-bound
// and the extra rows cost real FLOPs: the win shrinks (axis batch).
//
// Clock: wall, hot. One launch = serving::generate_speculative() over `batch` requests submitted together
// (each `prompt` random tokens, `output` tokens generated, ignore_eos): the prompts' prefill, then the
// decode loop, host scheduling and drafting included. The time is the batch's makespan; with prompts this
// short the decode loop is nearly all of it, so makespan / output is the time per output token (TPOT) at
// that batch. Plain decode steps replay CUDA graphs (the engine's fastest plain decode); verification
// steps (k + 1 rows per sequence) run eagerly; the draft model replays graphs for its own decode steps.
//
// Model: random weights of a published shape (axis model: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B),
// cached as for ch16:serving. Random weights make greedy generations fall into repeating cycles within a
// few dozen tokens, which prompt lookup then drafts well: on trained models and real prompts its
// acceptance depends on how much the output repeats the prompt (summaries, code edits, retrieval). The
// layer-skipping draft agrees with the target as far as the skipped layers change the argmax: on random
// weights, measured (the acceptance rate is a fact of each step).
//
// Gate: as ch16:serving (serving/ladder_workload.hpp): each generated token is the target's teacher-forced
// best token given the generation's own prefix, or within a bf16 near-tie of it. A speculative step's
// tokens are plain greedy decoding by construction (every emitted token is a target argmax), so this is
// the same judge as the baseline's, and a wrong verification row fails it.
//
// Declared work: 2 x parameters x (prompt + output) tokens per request, bf16: a floor (the rejected drafts'
// rows and the draft model's FLOPs are not counted, so MFU cannot be inflated by wasted work).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device/buffer.hpp"
#include "device/ladder.hpp"
#include "serving/engine_api.hpp"
#include "serving/gpu/llama_runner.hpp"
#include "serving/speculative.hpp"

namespace aisp::serving::speculative_ladder {

struct Args {
  LlamaRunner* target = nullptr;
  LlamaRunner* draft = nullptr;  // the target's first draft_layers layers
  // The whole target with fp8_weights, made on the first call (only step 04 asks: steps 01-03 neither wait
  // for its construction nor hold its memory). Throws aisp::UsageError where the runner refuses FP8.
  std::function<LlamaRunner&()> fp8_draft;
  const std::vector<GenerationRequest>* requests = nullptr;
  std::int32_t* tokens = nullptr;  // device: requests x output, each row's generated tokens
  int output = 0;
  int num_draft = 0;  // k
};

// One launch's run (acceptance, steps) and the decode graphs the target and the layer-skip draft
// captured during it (0 when set-up captured every shape the launch met).
struct LadderRun {
  SpeculativeRun run;
  int graphs_captured = 0;
};

// What every step does per launch: generate_speculative(target, drafter, requests) with the target's
// decode graphs on, the tokens copied to a.tokens on `stream`. Throws if a request ends other than by
// reaching its length. Returns the run for the step's facts.
LadderRun run_requests(const Args& a, Drafter* drafter, cudaStream_t stream);

// The facts a step reports from its last launch: target steps, graphs captured during the launch, and
// acceptance when it drafted.
std::vector<Fact> run_facts(const LadderRun& last, bool drafted);

class SpeculativeProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  SpeculativeProblem();
  ~SpeculativeProblem() override;

  void allocate(const AxisValues& axes, const DeviceFacts& device) override;
  void generate(std::uint64_t seed, cudaStream_t stream) override;
  std::vector<TensorView> inputs() const override;
  std::vector<TensorView> outputs() const override;
  std::vector<TensorView> references() const override { return {}; }
  Tolerance tolerance() const override { return {0, 0}; }  // unused: judge_outputs decides
  Work work() const override;
  Args args() const override { return m_args; }
  std::string judge_outputs(cudaStream_t stream) override;

 private:
  int m_batch = 0, m_prompt = 0, m_output = 0, m_vocab = 0, m_first_id = 0;
  int m_step_rows = 0;  // the most rows of a verification or a draft's catch-up step: batch x (1 + k)
  int m_context = 0;    // the longest context: prompt + output + k + 1
  std::unique_ptr<LlamaRunner> m_target, m_draft, m_fp8_draft;
  std::filesystem::path m_model_dir;  // the cached model, for m_fp8_draft's construction
  RunnerOptions m_draft_options;      // the drafts' options (m_fp8_draft adds fp8_weights, all layers)
  LlamaRunner& fp8_draft();
  std::vector<GenerationRequest> m_requests;
  DeviceBuffer<std::int32_t> m_prompts;  // the prompts, for the harness's input hash
  DeviceBuffer<std::int32_t> m_tokens;
  double m_params = 0;
  Args m_args{};
};

}  // namespace aisp::serving::speculative_ladder
