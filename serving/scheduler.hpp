// Scheduler: iteration-level batching (Orca, vLLM v1). Each engine step it decides which sequences
// compute how many tokens, within a token budget, a cap on running sequences and the free KV
// blocks; after the step it appends the sampled tokens, detects the end of each sequence and gives
// its blocks back. Single-threaded: the engine loop owns it (docs/serving-scheduler.md has the
// policies).
//
// A sequence's tokens are its prompt followed by what it generated. `computed` of them have their
// K/V in the cache; the step computes tokens [computed, computed + n). A decode is the n = 1 case
// after the prompt; a prefill chunk is anything else. Preemption by recomputation sets computed
// back to 0, so a readmitted sequence simply prefills prompt + generated tokens again and samples
// its next token at the end. With prefix caching, admission (first or again) starts `computed` at
// the cached prefix instead, always leaving at least one token to compute so that the step samples.
// With speculative decoding a decode may carry drafts: the step computes the last token and the
// drafts, and `computed` ends at the verification's kv_valid (scheduler_speculative.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "serving/block_manager.hpp"
#include "serving/engine_api.hpp"
#include "serving/runner_api.hpp"
#include "serving/speculative.hpp"

namespace aisp::serving {

// continuous: admit and retire sequences at every step. static: form a batch, run it until every
// member finished, admitting nobody in between; finished members stay in the batch as padding.
enum class SchedulingPolicy { continuous, static_batch };
// paged: blocks on demand as a sequence grows. reserved: prompt + max_tokens at admission.
enum class KvMode { paged, reserved };

// Defaults and meaning of every field: docs/serving-scheduler.md. EngineLoop fills the fields left
// at 0 (max_batched_tokens, num_kv_blocks, max_context, vocab_size) from its runner.
struct SchedulerConfig {
  SchedulingPolicy policy = SchedulingPolicy::continuous;
  KvMode kv_mode = KvMode::paged;
  int max_running = 64;         // sequences holding KV (static: members of one batch)
  int max_batched_tokens = 0;   // token budget of one step
  bool chunked_prefill = true;  // off: a prompt runs only when it fits the step's budget whole
  int max_waiting = 1024;       // never-admitted requests queued; more are refused (HTTP 429)
  int num_kv_blocks = 0;        // blocks in the pool
  int block_size = 16;          // tokens per block; must equal the runner's
  int max_context = 0;          // prompt + generated tokens of one sequence
  int vocab_size = 0;           // prompt ids must lie below it (0: not checked)
  TokenId eos_token_id = -1;    // ends a sequence unless the request sets ignore_eos (-1: none)
  // Automatic prefix caching (docs/serving.md, "Prefix caching"): full blocks stay indexed by their
  // prefix and a new sequence starts after the longest cached run of its tokens. Needs the
  // continuous policy and paged KV. Off by default: the ch16 ladder's steps stay what they were.
  bool prefix_cache = false;
  // Speculative decoding (docs/serving.md, "Speculative decoding"): each step the running
  // sequences about to decode ask `drafter` for up to num_draft tokens together, and the step
  // verifies them (greedy: the output is plain decoding's, token for token). Null: off. Not owned:
  // it must outlive the scheduler, which calls its release() as sequences end. Needs the
  // continuous policy and paged KV. Off by default, like prefix caching.
  Drafter* drafter = nullptr;
  int num_draft = 4;  // k: drafts asked for per sequence and step; positive
  // Prefill/decode disaggregation, the prefill engine's side (serving/disaggregated.hpp): once a
  // sequence's prompt is computed and its first token sampled (and that token did not end it), the
  // sequence is handed off (take_handoffs) instead of decoding here. It leaves the running set but
  // keeps its KV blocks, pinned (never preempted, never reused), until release_handed_off(): the
  // decode engine copies them first. Needs the continuous policy and paged KV, and no drafter.
  bool hand_off_after_prefill = false;
};

// Counters of prefix caching, since the scheduler started. A sequence is looked up each time it is
// admitted (a sequence readmitted after preemption again, with its generated tokens).
struct PrefixCacheStats {
  bool enabled = false;
  std::int64_t queried_tokens = 0;  // tokens of the admitted sequences
  std::int64_t hit_tokens = 0;      // of which found cached (not computed)
  int cached_blocks = 0;            // blocks indexed now (in use or evictable)
  int evictable_blocks = 0;         // cached blocks no sequence holds (counted as free)
  std::int64_t evictions = 0;       // cached blocks taken for other data
  [[nodiscard]] double hit_rate() const {
    if (queried_tokens == 0) return 0.0;
    return static_cast<double>(hit_tokens) / static_cast<double>(queried_tokens);
  }
};

[[nodiscard]] const char* policy_name(SchedulingPolicy policy);  // "continuous", "static"
[[nodiscard]] const char* kv_mode_name(KvMode mode);             // "paged", "reserved"
// The inverses, for command lines; aisp::UsageError on anything else.
[[nodiscard]] SchedulingPolicy parse_policy(std::string_view name);
[[nodiscard]] KvMode parse_kv_mode(std::string_view name);

// One event for the engine to deliver: a sampled token, a final event, or both.
struct SequenceEvent {
  SequenceId id = 0;
  TokenEvent event;
};

// What a step held, for metrics (the engine adds the time).
struct StepComposition {
  int sequences = 0;       // entries of the batch, padding included
  int prefill_tokens = 0;  // prompt chunks and recomputation after preemption
  int decode_tokens = 0;
  int padding_tokens = 0;  // static policy: dummy decodes of finished members (output discarded)
  int sampled = 0;
  int draft_tokens = 0;  // of decode_tokens: speculative drafts being verified
};

enum class AddStatus { accepted, queue_full, invalid };

// Disaggregation, prefill side: a sequence whose prompt is computed and whose first token was
// sampled (and is in the events already), for a decode engine to go on with.
struct HandOff {
  SequenceId id = 0;
  GenerationRequest request;    // as submitted: prompt, max_tokens, stop ids, ignore_eos
  TokenId first_token = -1;
  std::vector<BlockId> blocks;  // this pool's blocks holding the prompt: positions [0, prompt size)
};

// Disaggregation, decode side: a prefilled sequence just admitted (add_prefilled), and the blocks of
// this pool its prompt's K/V must be copied into (positions [0, prompt size)) before the next step.
struct PrefilledAdmission {
  SequenceId id = 0;
  std::vector<BlockId> blocks;
};

// Why a prompt of `tokens` cannot be taken into one step whole under `config` (chunked prefill off and
// the prompt longer than max_batched_tokens), or "". Scheduler::validate applies it to every request; a
// caller that knows its prompts can ask before building an engine.
[[nodiscard]] std::string whole_prompt_refusal(const SchedulerConfig& config, std::size_t tokens);

class Scheduler {
 public:
  // Throws aisp::UsageError for a config it cannot run (a non-positive size, a zero budget).
  explicit Scheduler(SchedulerConfig config);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Why `request` can never be served with this config (empty prompt, max_tokens <= 0, past
  // max_context, an id outside the vocabulary, longer than the budget without chunked prefill), or
  // "".
  [[nodiscard]] std::string validate(const GenerationRequest& request) const;
  // Queues a request under a fresh id. queue_full when max_waiting never-admitted requests are
  // waiting.
  AddStatus add(SequenceId id, GenerationRequest request, std::string* message = nullptr);

  // The next step. Empty when there is nothing to compute. At most one step is in flight: the
  // caller reports it with on_step_done or on_step_failed before asking for the next.
  [[nodiscard]] StepBatch schedule();
  // The runner's answer for the step in flight: appends the sampled tokens, finishes sequences.
  // A result with the wrong number of tokens fails the step (every sequence in it finishes with
  // error).
  void on_step_done(const StepResult& result);
  // The runner threw: every sequence of the step in flight finishes with reason error.
  void on_step_failed(const std::string& message);
  // Ends a sequence wherever it is and frees its blocks; false for an unknown or finished id. Must
  // not be called while a step is in flight (the runner may still be writing its blocks).
  bool cancel(SequenceId id);
  // Cancels everything (shutdown).
  void cancel_all();

  // Events produced since the last call (tokens, finishes), in order.
  [[nodiscard]] std::vector<SequenceEvent> take_events();

  // --- prefill/decode disaggregation (docs/serving.md, "Disaggregation") ---
  // Prefill side (hand_off_after_prefill): the sequences handed off since the last call, in order.
  // cancel() ignores a handed-off sequence (the decode engine owns it now); only
  // release_handed_off() frees its blocks, once their K/V was copied or will never be.
  [[nodiscard]] std::vector<HandOff> take_handoffs();
  // Frees a handed-off sequence's blocks and forgets it; false for an id not handed off. Not while a
  // step is in flight.
  bool release_handed_off(SequenceId id);
  [[nodiscard]] int num_handed_off() const { return m_handed_off; }
  // Decode side: queues a sequence whose prompt another engine computed and whose first token it
  // sampled (and delivered): it joins with computed = prompt size and decodes from its first
  // token on. Not counted against max_waiting (the prefill engine's queue bounds the intake).
  // invalid as add() finds it, or when this scheduler is not continuous with paged KV.
  AddStatus add_prefilled(SequenceId id, GenerationRequest request, TokenId first_token,
                          std::string* message = nullptr);
  // Admits queued prefilled sequences in order while max_running and the free blocks allow, and
  // none that were preempted wait (they are older and would only be preempted again): each gets the
  // blocks for its prompt and the position its next step writes, so that it decodes without
  // preempting anyone. The caller must copy each one's K/V into its blocks before the next
  // schedule(), or fail() it. Not while a step is in flight.
  [[nodiscard]] std::vector<PrefilledAdmission> admit_prefilled();
  [[nodiscard]] int num_prefilled_waiting() const { return static_cast<int>(m_prefilled.size()); }
  // Ends a live sequence with reason error and frees its blocks (a failed K/V copy); false for an
  // unknown or finished id. Not while a step is in flight.
  bool fail(SequenceId id, std::string message);

  [[nodiscard]] bool has_work() const {
    return !m_waiting.empty() || !m_running.empty() || !m_prefilled.empty();
  }
  [[nodiscard]] bool step_in_flight() const { return m_in_flight; }
  [[nodiscard]] int num_waiting() const { return static_cast<int>(m_waiting.size()); }
  [[nodiscard]] int num_waiting_new() const { return m_waiting_new; }  // never admitted yet
  [[nodiscard]] int num_running() const { return static_cast<int>(m_running.size()); }
  [[nodiscard]] std::int64_t preemptions() const { return m_preemptions; }
  [[nodiscard]] std::int64_t generated_tokens() const { return m_generated_tokens; }
  [[nodiscard]] const StepComposition& last_composition() const { return m_composition; }
  [[nodiscard]] PrefixCacheStats prefix_cache_stats() const;
  // Speculative decoding: one verification per sequence and step that carried drafts (a decode
  // whose proposal was empty or trimmed away is a plain one and not counted). All 0 when off.
  [[nodiscard]] bool speculative() const { return m_config.drafter != nullptr; }
  [[nodiscard]] const AcceptanceStats& acceptance_stats() const { return m_acceptance; }
  [[nodiscard]] const BlockManager& blocks() const { return m_blocks; }
  [[nodiscard]] const SchedulerConfig& config() const { return m_config; }
  // Tokens of a live sequence (prompt + generated) and how many are cached; for tests.
  [[nodiscard]] std::vector<TokenId> tokens_of(SequenceId id) const;
  [[nodiscard]] int computed_of(SequenceId id) const;
  [[nodiscard]] bool is_running(SequenceId id) const;

 private:
  struct Sequence;
  struct Planned {
    Sequence* seq;
    int num_tokens;  // drafts included
    bool padding;
    int drafts = 0;  // speculative: a verification of the last token and seq->draft[0, drafts)
  };

  void schedule_decodes(std::vector<Planned>& plan, int& budget, bool& preempted);
  void schedule_padding(std::vector<Planned>& plan, int& budget);
  void schedule_prefills(std::vector<Planned>& plan, int& budget, bool& preempted);
  void admit_waiting(std::vector<Planned>& plan, int& budget);
  void form_static_batch();
  [[nodiscard]] int chunk_for(const Sequence& seq, int budget) const;
  // Grows seq's table to `tokens` positions, preempting later-admitted sequences if blocks run
  // short. Returns false when seq itself was preempted or finished with an error instead.
  bool ensure_blocks(Sequence& seq, int tokens, std::vector<Planned>& plan, int& budget,
                     bool& preempted);
  [[nodiscard]] bool admit_blocks(Sequence& seq, int tokens);
  // Prefix caching: maps the cached prefix of a sequence about to be admitted into its table and
  // moves `computed` past it; unmatch() undoes that when the admission does not happen after all.
  void match_cached_prefix(Sequence& seq);
  void unmatch(Sequence& seq);
  void preempt(Sequence& seq, std::vector<Planned>& plan, int& budget);
  // Speculative decoding (scheduler_speculative.cpp): one proposal for every sequence about to
  // decode, into its `draft`; then the planned decodes take what of it the leftover budget and free
  // blocks allow; after the step, the verification of one sequence's drafts.
  void propose_drafts();
  void schedule_drafts(std::vector<Planned>& plan, int& budget);
  void verify_drafts(Sequence& seq, std::span<const TokenId> draft,
                     std::span<const TokenId> target);
  // The finish rules of append_token as speculative.hpp states them.
  [[nodiscard]] FinishRule finish_rule_of(const Sequence& seq) const;
  void free_padding(Sequence& seq, std::vector<Planned>& plan, int& budget);
  bool free_some_padding(std::vector<Planned>& plan, int& budget);
  static void drop_from_plan(std::vector<Planned>& plan, const Sequence& seq, int& budget);
  // True when the token ended the sequence (it is gone then).
  bool append_token(Sequence& seq, TokenId token);
  void finish(Sequence& seq, FinishReason reason, TokenId token, std::string error = {});
  void hand_off(Sequence& seq);
  void remove_running(Sequence& seq);
  void release_static_batch_if_done();
  [[nodiscard]] int whole_context(const Sequence& seq) const;
  [[nodiscard]] Sequence* find(SequenceId id) const;

  SchedulerConfig m_config;
  BlockManager m_blocks;
  std::unordered_map<SequenceId, std::unique_ptr<Sequence>> m_sequences;
  std::deque<Sequence*> m_waiting;   // FCFS; preempted sequences go back to the front
  std::vector<Sequence*> m_running;  // in admission order: the back is preempted first
  std::deque<Sequence*> m_prefilled;  // decode side: prefilled sequences not admitted yet, in order
  std::vector<HandOff> m_handoffs;    // prefill side: handed off since take_handoffs()
  int m_handed_off = 0;               // prefill side: holding blocks until released
  int m_waiting_new = 0;
  std::int64_t m_admissions = 0;
  std::int64_t m_preemptions = 0;
  std::int64_t m_generated_tokens = 0;
  std::int64_t m_prefix_queried = 0;
  std::int64_t m_prefix_hits = 0;
  AcceptanceStats m_acceptance;
  int m_static_live = 0;  // static: members of the current batch not yet finished
  bool m_in_flight = false;
  struct FlightEntry {
    SequenceId id;
    int num_tokens;
    bool padding;
    bool sample;
    std::vector<TokenId> draft;  // non-empty: sample_all, num_tokens = 1 + draft.size()
  };
  std::vector<FlightEntry> m_flight;  // the step in flight
  std::vector<SequenceEvent> m_events;
  StepComposition m_composition;
};

}  // namespace aisp::serving
