// The workload and the judge of the ch16:serving ladder (serving/ladder/), host-only so that the CPU tests
// cover them: a seeded set of generation requests of varied prompt and output lengths, and the rule that
// decides whether an engine's greedy tokens are right.
//
// Why not "the same tokens as a reference": a greedy generation's tokens depend on its logits' last bits,
// and those depend on the batch it ran in (cuBLASLt picks another kernel per shape, the decode kernel
// another split). Where the two best logits of a step are a bf16 near-tie, two correct engines pick
// different tokens, and from there on they continue different texts. vLLM's tests compare implementations
// the same way in spirit (tests/models/utils.py, check_logprobs_close: where the tokens differ, each must
// be among the other's top candidates). The rule here is its teacher-forced form: each generated token,
// given the engine's own prefix, must be the model's best token or within a tolerance of it, the logits
// computed by the runner's prefill path (one sequence, no batching, all positions at once), a different
// path from the engine's decode steps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "serving/engine_api.hpp"

namespace aisp::serving {

struct LadderWorkloadSpec {
  int requests = 64;
  int prompt_min = 64, prompt_max = 512;  // prompt lengths, uniform in [min, max]
  int output_min = 32, output_max = 128;  // max_tokens, uniform in [min, max] (ignore_eos: all generated)
  int vocab = 0;                          // prompt ids uniform in [first_id, vocab)
  int first_id = 0;
  // The lengths come from this seed, the token ids from the run's: every seed of a run serves the same
  // shape of workload (the same tokens to compute, so the declared work is exact), with other contents.
  std::uint64_t shape_seed = 1;
};

// Requests with ignore_eos set, in submission order; a pure function of (spec, seed). Throws UsageError
// on an empty or inverted range, or a vocabulary without ids above first_id.
std::vector<GenerationRequest> make_ladder_workload(const LadderWorkloadSpec& spec, std::uint64_t seed);
// Prompt tokens + max_tokens summed over the workload: the same for every seed.
[[nodiscard]] double ladder_workload_tokens(const LadderWorkloadSpec& spec);

// One generated token scored by teacher forcing: its logit, and the best logit of that row with its token.
struct ScoredToken {
  TokenId token = -1;
  float logit = 0;
  TokenId best = -1;
  float best_logit = 0;
};

// How far below the best logit a generated token may score: twice the largest distance between bf16 and
// fp32 logits measured on these models (HF bf16, Llama-3.2-1B shape: 0.165, docs/serving-runner.md
// "Tolerance"), rounded up to 0.35, or 2^-4 of the row's best |logit| where that is larger (4 bf16 ulps at
// the top of the row's binade).
[[nodiscard]] float near_tie_tolerance(float best_logit);

// Fewer exact argmax tokens than this fraction fails the judge even when every token lies within the
// tolerance: an engine that systematically emits a runner-up token is wrong. Random-weight models have
// many near-ties (HF's own bf16 argmax agrees with fp32 at 93% of positions on the 1B shape), so the floor
// sits well below that.
inline constexpr double k_min_exact_fraction = 0.8;

struct JudgeTally {
  std::int64_t tokens = 0;
  std::int64_t exact = 0;      // token == the teacher-forced best
  std::int64_t near_ties = 0;  // token != best, within the tolerance
  float worst_gap = 0;         // largest best_logit - logit seen
};

// Adds one request's scored tokens to `tally`; returns "" or the first token out of tolerance, named by
// request and position.
std::string judge_request(int request, const std::vector<ScoredToken>& scored, JudgeTally& tally);
// "" when the tally's exact fraction meets k_min_exact_fraction, else why not.
std::string judge_totals(const JudgeTally& tally);

// The serving ladders' models: random weights of a published shape, written once per machine.
// ladder_model_preset: the preset of a `model` axis value (0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B);
// anything else is a UsageError naming `target`.
[[nodiscard]] std::string ladder_model_preset(std::int64_t model, const std::string& target);
// The folder $AISP_CACHE_DIR/models/<preset>-random-7, written on first use (config.json last, so a folder
// with one is complete; an interrupted write is redone), with a line on stderr while it is written.
[[nodiscard]] std::filesystem::path cached_ladder_model(const std::string& preset, const std::string& target);

}  // namespace aisp::serving
