// Speculative decoding, greedy: a drafter proposes k tokens for a sequence, the target model scores
// the last accepted token and the k drafts in one step (k + 1 positions, an argmax after each), and
// the longest prefix of drafts that equals the target's own argmax is kept, followed by the
// target's token at the first mismatch (or its bonus token after the k-th draft). Every emitted
// token is the target's argmax given exactly the tokens before it, so the output equals plain
// greedy decoding by construction; a draft only decides how many of those tokens one step yields
// (Leviathan et al. 2023, greedy case; vLLM's and SGLang's verification do the same at temperature
// 0).
//
// Here: the verification as a pure function, the KV bookkeeping it implies, drafters (prompt
// lookup, and the interface a draft model plugs into), acceptance accounting, and
// generate_speculative(), a small driver that runs requests through a ModelRunner with speculation
// (the reference the engine's scheduler integration and the GPU tests compare against). Plain C++.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "serving/block_manager.hpp"
#include "serving/engine_api.hpp"
#include "serving/runner_api.hpp"

namespace aisp::serving {

// ---- when a sequence ends ----
// The scheduler's rules: a stop id or eos is emitted and ends it; max_tokens; prompt + generated
// reaching max_context.
struct FinishRule {
  std::vector<TokenId> stop_token_ids;
  TokenId eos_token_id = -1;  // -1: none (or the request ignores eos)
  int max_tokens = 0;
  int max_context = 0;
  [[nodiscard]] bool is_stop(TokenId token) const;
  // Tokens a sequence of `length` tokens, `generated` of them generated, may still emit (>= 0).
  [[nodiscard]] int max_emit(int generated, int length) const;
};
[[nodiscard]] FinishRule finish_rule_for(const GenerationRequest& request, TokenId eos_token_id,
                                         int max_context);

// ---- verification ----
// The target's argmaxes for one sequence of one step: target[i] is the argmax after position
// first_position + i, where first_position holds the last accepted token and first_position + 1 + i
// holds draft[i]. So target.size() == draft.size() + 1.
struct Verification {
  std::vector<TokenId> emitted;  // to append to the sequence, in order: accepted drafts, then the
                                 // target's own token; cut after a stop token or at max_emit
  int accepted = 0;              // drafts equal to the target's argmax (the matched prefix,
                                 // before the cut: what the drafter earned)
  // Positions whose K/V stay valid: [0, kv_valid) = first_position + emitted.size(). Rejected
  // drafts' K/V (positions >= kv_valid) are stale; the last emitted token has none yet. The next
  // step of the sequence starts at start_position = kv_valid with that last token (see KV
  // bookkeeping below).
  int kv_valid = 0;
  FinishReason finish = FinishReason::none;  // stop or length when the sequence ends here
};

// Throws aisp::UsageError when target.size() != draft.size() + 1, first_position < 0 or max_emit <
// 1 (a sequence that may emit nothing must not be scheduled).
[[nodiscard]] Verification verify_greedy(std::span<const TokenId> draft,
                                         std::span<const TokenId> target, int first_position,
                                         const FinishRule& rule, int max_emit);

// ---- KV bookkeeping after a verification ----
// The sequence's next step starts at kv_valid, so the slots of rejected drafts are written again
// before anything reads them (attention reads only [0, start_position + tokens.size())). Blocks
// past blocks_for_tokens(kv_valid) hold only stale slots: a scheduler may keep them (the next step
// likely needs them again) or release them under memory pressure; either is correct. A prefix cache
// must not publish a block until every one of its slots lies below kv_valid.
struct TableRollback {
  std::vector<BlockId> kept;      // covers [0, kv_valid)
  std::vector<BlockId> released;  // hold only positions >= kv_valid
};
// Throws aisp::UsageError when kv_valid < 0, block_size <= 0 or the table is too short for
// kv_valid.
[[nodiscard]] TableRollback roll_back_table(std::span<const BlockId> table, int kv_valid,
                                            int block_size);

// ---- acceptance accounting ----
class AcceptanceStats {
 public:
  // One verification: `proposed` drafts scored, the first `accepted` of them taken, `emitted`
  // tokens appended (accepted + 1 unless the sequence ended inside the run). UsageError on
  // inconsistent counts.
  void record(int proposed, int accepted, int emitted);
  void merge(const AcceptanceStats& other);

  [[nodiscard]] std::int64_t verifications() const { return m_verifications; }
  [[nodiscard]] std::int64_t proposed() const { return m_proposed; }
  [[nodiscard]] std::int64_t accepted() const { return m_accepted; }
  [[nodiscard]] std::int64_t emitted() const { return m_emitted; }
  // accepted / proposed (0 when nothing was proposed).
  [[nodiscard]] double acceptance_rate() const;
  // Tokens emitted per verification: what one target step of a sequence yields (1 = plain
  // decoding).
  [[nodiscard]] double tokens_per_verification() const;
  // Per draft position i (0-based): drafts proposed there, and the share accepted (0 when none).
  [[nodiscard]] int positions() const { return static_cast<int>(m_proposed_at.size()); }
  [[nodiscard]] std::int64_t proposed_at(int i) const;
  [[nodiscard]] double acceptance_at(int i) const;
  // One line, e.g. "acceptance 0.412 (103/250 drafts), 1.83 tokens/verification, by position [0.61
  // 0.42 0.30]".
  [[nodiscard]] std::string summary() const;

 private:
  std::int64_t m_verifications = 0;
  std::int64_t m_proposed = 0;
  std::int64_t m_accepted = 0;
  std::int64_t m_emitted = 0;
  std::vector<std::int64_t> m_proposed_at;
  std::vector<std::int64_t> m_accepted_at;
};

// ---- drafters ----
struct DraftRequest {
  SequenceId id = 0;
  std::span<const TokenId> tokens;  // prompt + generated; the last one is not verified yet (no K/V)
  int max_draft = 0;                // propose at most this many (0: nothing)
};

// A drafter proposes continuations; it may be wrong (that only costs speed). A draft model plugs in
// here: it keeps its own KV cache per sequence, and since a proposal may be rejected, it keeps the
// tokens it has cached and, at the next propose(), takes as valid only their longest common prefix
// with the sequence's tokens, short of its last token (everything after was a rejected draft, and
// the last token's logits give the first draft), recomputing from there. So no callback about
// verification outcomes is needed. release() is called when a sequence ends.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // One proposal per request, in order, each at most its max_draft tokens (empty: decode plainly).
  [[nodiscard]] virtual std::vector<std::vector<TokenId>> propose(
      std::span<const DraftRequest> requests) = 0;
  virtual void release(SequenceId /*id*/) {}
};

// Prompt lookup (n-gram) drafting (Saxena 2023, transformers' prompt_lookup_num_tokens, vLLM's
// ngram proposer): the last n tokens of prompt + output are searched for earlier in it, longest n
// first, the most recent occurrence wins, and the tokens that followed it are proposed.
struct PromptLookupOptions {
  int min_ngram = 1;
  int max_ngram = 3;
  int num_draft = 4;  // k
};
// UsageError unless 1 <= min_ngram <= max_ngram and num_draft >= 0.
void validate(const PromptLookupOptions& options);

// Up to min(num_draft, max_draft) tokens; empty when no n-gram of the allowed sizes recurs. The
// copy may run past the end of `tokens` into the proposal itself (as an LZ77 match does): a
// repeating pattern of period p then proposes its continuation, not just the p tokens seen. Linear
// scan: O(len x max_ngram) per call.
[[nodiscard]] std::vector<TokenId> prompt_lookup(std::span<const TokenId> tokens,
                                                 const PromptLookupOptions& options, int max_draft);

class PromptLookupDrafter final : public Drafter {
 public:
  explicit PromptLookupDrafter(PromptLookupOptions options = {});
  [[nodiscard]] std::vector<std::vector<TokenId>> propose(
      std::span<const DraftRequest> requests) override;

 private:
  PromptLookupOptions m_options;
};

// A draft model as a Drafter: any ModelRunner of the same vocabulary (a smaller model, or a cheaper
// version of the target: FP8, fewer layers) with its own KV pool, decoding greedily. Each propose()
// first drops what the sequence no longer shares with its cache (rejected drafts), prefills the
// rest in chunks within the runner's budget (the sampled id is the first draft), then decodes one
// token per step for all sequences together up to their max_draft. It never fails a request: a
// sequence whose KV does not fit gets a shorter (or empty) proposal. Tokens the runner's
// max_context cannot hold are not drafted.
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(ModelRunner& runner);
  [[nodiscard]] std::vector<std::vector<TokenId>> propose(
      std::span<const DraftRequest> requests) override;
  void release(SequenceId id) override;
  [[nodiscard]] std::int64_t steps() const { return m_steps; }  // the draft runner's
  [[nodiscard]] const BlockManager& blocks() const { return m_blocks; }

 private:
  ModelRunner& m_runner;
  BlockManager m_blocks;
  std::unordered_map<SequenceId, std::vector<TokenId>> m_cached;  // tokens whose K/V it holds
  std::int64_t m_steps = 0;
};

// ---- a driver: requests through a runner with speculation ----
// The runner contract it uses (runner_api.hpp): a verifying sequence's tokens are its last token
// and its drafts, with sample_all set, and StepResult carries an argmax after each of them.
struct SpeculativeOptions {
  int num_draft = 4;          // k: drafts asked for per verification (0: plain greedy decoding)
  TokenId eos_token_id = -1;  // ends a sequence unless it ignores eos
};
struct SpeculativeGeneration {
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::none;
};
struct SpeculativeRun {
  std::vector<SpeculativeGeneration> outputs;  // one per request, in order
  AcceptanceStats stats;                       // decode-phase verifications only
  std::int64_t steps = 0;                      // runner steps
  std::vector<int> start_positions;            // of every verifying sequence, step by step (tests)
};

// Runs every request to its end: all admitted at once, prompts prefilled in chunks within the
// runner's token budget, then every step each live sequence verifies its drafts (drafter may be
// null: plain decoding). It does not preempt: UsageError when the runner's KV pool runs out, or for
// a request the runner cannot hold (empty prompt, max_tokens < 1, prompt + 1 > max_context).
// aisp::DataError when the runner returns the wrong number of ids.
[[nodiscard]] SpeculativeRun generate_speculative(ModelRunner& runner, Drafter* drafter,
                                                  const std::vector<GenerationRequest>& requests,
                                                  const SpeculativeOptions& options);

}  // namespace aisp::serving
