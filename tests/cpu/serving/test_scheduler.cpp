// Scheduler decisions, step by step, with the FakeRunner computing every step (so the tokens are
// also checked against fake_reference): budget, decode-first order, chunking, max_running, FCFS,
// the static policy and its padding, reserved KV, preemption, finish rules, cancel, runner failure,
// queue limit.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <stdexcept>

#include "core/base/error.hpp"
#include "serving/fake_runner.hpp"
#include "serving/scheduler.hpp"

using namespace aisp::serving;

namespace {

constexpr int kVocab = 1000;

struct Outcome {
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::none;
  std::string error;
};

struct Harness {
  Scheduler sched;
  FakeRunner runner;
  std::map<SequenceId, Outcome> out;

  explicit Harness(SchedulerConfig c)
      : sched(c),
        runner(FakeRunnerOptions{c.num_kv_blocks, c.block_size, c.max_batched_tokens, kVocab,
                                 c.max_context}) {}

  void collect() {
    for (const auto& e : sched.take_events()) {
      Outcome& o = out[e.id];
      ASSERT_EQ(o.reason, FinishReason::none) << "event after the final one for " << e.id;
      if (e.event.token >= 0) o.tokens.push_back(e.event.token);
      if (e.event.finished) {
        o.reason = e.event.reason;
        o.error = e.event.error;
      }
    }
  }
  void add(SequenceId id, std::vector<TokenId> prompt, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    ASSERT_EQ(sched.add(id, r), AddStatus::accepted);
  }
  StepBatch step() {
    StepBatch b = sched.schedule();
    collect();
    EXPECT_LE(b.token_count(), sched.config().max_batched_tokens);
    if (!b.sequences.empty()) sched.on_step_done(runner.step(b));
    collect();
    EXPECT_EQ(sched.blocks().check_invariants(), "");
    return b;
  }
  void run_all(int max_steps = 10000) {
    for (int i = 0; i < max_steps && sched.has_work(); ++i) step();
    ASSERT_FALSE(sched.has_work());
    EXPECT_EQ(sched.blocks().num_used(), 0);
  }
};

std::vector<TokenId> prompt_of(int n, int seed = 0) {
  std::vector<TokenId> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = (seed * 131 + i * 17 + 3) % kVocab;
  return p;
}

std::vector<TokenId> reference(const std::vector<TokenId>& prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  return fake_reference(r, kVocab).tokens;
}

SchedulerConfig base_config() {
  SchedulerConfig c;
  c.max_running = 8;
  c.max_batched_tokens = 16;
  c.num_kv_blocks = 64;
  c.block_size = 4;
  c.max_context = 512;
  c.vocab_size = kVocab;
  return c;
}

}  // namespace

TEST(Scheduler, RejectsBadConfigAndValidatesRequests) {
  SchedulerConfig bad = base_config();
  bad.max_batched_tokens = 0;
  EXPECT_THROW((Scheduler{bad}), aisp::UsageError);
  SchedulerConfig c = base_config();
  c.chunked_prefill = false;
  Scheduler s(c);
  GenerationRequest r;
  EXPECT_NE(s.validate(r).find("empty"), std::string::npos);
  r.prompt = prompt_of(4);
  r.max_tokens = 0;
  EXPECT_NE(s.validate(r).find("max_tokens"), std::string::npos);
  r.max_tokens = 510;
  EXPECT_NE(s.validate(r).find("context"), std::string::npos);
  r.max_tokens = 4;
  r.prompt[1] = kVocab;
  EXPECT_NE(s.validate(r).find("vocabulary"), std::string::npos);
  r.prompt = prompt_of(17);  // longer than the 16-token budget, chunking off: refused up front
  EXPECT_NE(s.validate(r).find("max_batched_tokens"), std::string::npos);
  EXPECT_EQ(s.add(1, r), AddStatus::invalid);
  r.prompt = prompt_of(16);
  EXPECT_EQ(s.validate(r), "");
  // The same rule asked up front (ch16:serving's unchunked steps): only with chunking off.
  EXPECT_NE(whole_prompt_refusal(c, 17).find("chunked prefill is off"), std::string::npos);
  EXPECT_EQ(whole_prompt_refusal(c, 16), "");
  c.chunked_prefill = true;
  EXPECT_EQ(whole_prompt_refusal(c, 17), "");
  EXPECT_EQ(parse_policy(policy_name(SchedulingPolicy::static_batch)),
            SchedulingPolicy::static_batch);
  EXPECT_EQ(parse_kv_mode(kv_mode_name(KvMode::reserved)), KvMode::reserved);
  EXPECT_THROW((void)parse_policy("dynamic"), aisp::UsageError);
}

TEST(Scheduler, DecodesComeFirstAndTheBudgetHolds) {
  SchedulerConfig c = base_config();
  c.max_batched_tokens = 8;
  Harness h(c);
  h.add(1, prompt_of(5), 10);
  StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(b.sequences[0].tokens.size(), 5u);
  EXPECT_TRUE(b.sequences[0].sample);
  h.add(2, prompt_of(20, 1), 3);
  const std::vector<int> chunks = {7, 7, 6};
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    b = h.step();
    ASSERT_EQ(b.sequences.size(), 2u) << "step " << i;
    EXPECT_EQ(b.sequences[0].id, 1);  // the decode first
    EXPECT_EQ(b.sequences[0].tokens.size(), 1u);
    EXPECT_TRUE(b.sequences[0].sample);
    EXPECT_EQ(b.sequences[1].id, 2);  // then the chunk, in what the budget leaves
    EXPECT_EQ(static_cast<int>(b.sequences[1].tokens.size()), chunks[i]);
    EXPECT_EQ(b.sequences[1].sample, i + 1 == chunks.size());
    EXPECT_EQ(b.token_count(), 1 + chunks[i]);
  }
  h.run_all();
  EXPECT_EQ(h.out[1].tokens, reference(prompt_of(5), 10));
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(20, 1), 3));
}

TEST(Scheduler, ChunkedPrefillSplitsALongPromptAndSamplesOnlyAtTheEnd) {
  Harness h(base_config());
  const auto prompt = prompt_of(50, 2);
  h.add(7, prompt, 4);
  const std::vector<int> starts = {0, 16, 32, 48};
  for (std::size_t i = 0; i < starts.size(); ++i) {
    StepBatch b = h.step();
    ASSERT_EQ(b.sequences.size(), 1u);
    const auto& s = b.sequences[0];
    EXPECT_EQ(s.start_position, starts[i]);
    EXPECT_EQ(static_cast<int>(s.tokens.size()), i + 1 < starts.size() ? 16 : 2);
    EXPECT_EQ(s.sample, i + 1 == starts.size());
    EXPECT_EQ(static_cast<int>(s.blocks.size()),
              (starts[i] + static_cast<int>(s.tokens.size()) + 3) / 4);
    EXPECT_EQ(h.out[7].tokens.size(), i + 1 == starts.size() ? 1u : 0u);
  }
  h.run_all();
  EXPECT_EQ(h.out[7].tokens, reference(prompt, 4));
  EXPECT_EQ(h.out[7].reason, FinishReason::length);
}

TEST(Scheduler, WithoutChunkingAPromptWaitsUntilItFitsWhole) {
  SchedulerConfig c = base_config();
  c.chunked_prefill = false;
  Harness h(c);
  h.add(1, prompt_of(10), 5);
  h.add(2, prompt_of(10, 1), 5);
  StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 1u);  // 6 tokens left: the second prompt does not fit whole
  EXPECT_EQ(b.sequences[0].id, 1);
  b = h.step();
  ASSERT_EQ(b.sequences.size(), 2u);
  EXPECT_EQ(b.sequences[1].id, 2);
  EXPECT_EQ(b.sequences[1].tokens.size(), 10u);
  h.run_all();
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(10, 1), 5));
}

TEST(Scheduler, MaxRunningAndFcfs) {
  SchedulerConfig c = base_config();
  c.max_running = 2;
  Harness h(c);
  h.add(1, prompt_of(3, 1), 2);
  h.add(2, prompt_of(3, 2), 6);
  h.add(3, prompt_of(3, 3), 2);
  h.add(4, prompt_of(3, 4), 2);
  StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 2u);
  EXPECT_EQ(b.sequences[0].id, 1);
  EXPECT_EQ(b.sequences[1].id, 2);
  EXPECT_EQ(h.sched.num_running(), 2);
  EXPECT_EQ(h.sched.num_waiting(), 2);
  h.step();  // 1 finishes (max_tokens 2)
  EXPECT_EQ(h.out[1].reason, FinishReason::length);
  b = h.step();  // 3 takes its place, 4 still waits
  EXPECT_TRUE(h.sched.is_running(3));
  EXPECT_FALSE(h.sched.is_running(4));
  EXPECT_LE(h.sched.num_running(), 2);
  h.run_all();
  for (int id = 1; id <= 4; ++id) {
    EXPECT_EQ(h.out[id].tokens, reference(prompt_of(3, id), id == 2 ? 6 : 2)) << id;
  }
}

TEST(Scheduler, HeadOfLineIsNotOvertaken) {
  SchedulerConfig c = base_config();
  c.chunked_prefill = false;
  Harness h(c);
  h.add(1, prompt_of(4), 20);
  h.step();                       // 1 now decodes: 15 tokens left in each step's budget
  h.add(2, prompt_of(16, 1), 2);  // fits only a whole budget: never while 1 decodes
  h.add(3, prompt_of(1, 2), 2);   // would fit, but must not overtake 2
  for (int i = 0; i < 5; ++i) {
    StepBatch b = h.step();
    ASSERT_EQ(b.sequences.size(), 1u);
    EXPECT_EQ(b.sequences[0].id, 1);
  }
  h.run_all();
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(16, 1), 2));
  EXPECT_EQ(h.out[3].tokens, reference(prompt_of(1, 2), 2));
}

TEST(Scheduler, StaticBatchAdmitsNobodyUntilDrainedAndPadsFinishedMembers) {
  SchedulerConfig c = base_config();
  c.policy = SchedulingPolicy::static_batch;
  c.kv_mode = KvMode::reserved;
  c.max_running = 3;
  Harness h(c);
  h.add(1, prompt_of(3, 1), 1);
  h.add(2, prompt_of(3, 2), 3);
  h.add(3, prompt_of(3, 3), 5);
  h.add(4, prompt_of(3, 4), 2);
  StepBatch b = h.step();  // the batch forms: 1, 2, 3 prefill; 1 finishes at once
  ASSERT_EQ(b.sequences.size(), 3u);
  EXPECT_EQ(h.out[1].reason, FinishReason::length);
  for (int i = 0; i < 4; ++i) {  // four more steps: 3's decodes, with 1 (and then 2) as padding
    b = h.step();
    ASSERT_EQ(b.sequences.size(), 3u) << "step " << i;
    int padded = 0;
    for (const auto& s : b.sequences) {
      EXPECT_NE(s.id, 4) << "admitted into a running static batch";
      if (!s.sample) {
        ++padded;
        ASSERT_EQ(s.tokens.size(), 1u);
        // The dummy rewrites an already cached position with the token already there.
        auto full = prompt_of(3, static_cast<int>(s.id));
        full.insert(full.end(), h.out[s.id].tokens.begin(), h.out[s.id].tokens.end());
        ASSERT_LT(s.start_position + 1, static_cast<int>(full.size()));
        EXPECT_EQ(s.tokens[0], full[static_cast<std::size_t>(s.start_position)]);
        EXPECT_EQ(h.out[s.id].reason, FinishReason::length);
      }
    }
    EXPECT_EQ(padded, i < 2 ? 1 : 2);
    EXPECT_EQ(h.sched.last_composition().padding_tokens, padded);
  }
  EXPECT_EQ(h.out[3].reason, FinishReason::length);
  b = h.step();  // the batch drained: 4 forms the next one
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(b.sequences[0].id, 4);
  h.run_all();
  for (int id = 1; id <= 4; ++id) {
    const int max_tokens[] = {0, 1, 3, 5, 2};
    EXPECT_EQ(h.out[id].tokens, reference(prompt_of(3, id), max_tokens[id])) << id;
  }
}

TEST(Scheduler, ReservedModeAllocatesTheWholeContextAtAdmission) {
  SchedulerConfig c = base_config();
  c.kv_mode = KvMode::reserved;
  c.num_kv_blocks = 12;
  Harness h(c);
  h.add(1, prompt_of(10), 30);   // 40 tokens: 10 blocks of 4 at once
  h.add(2, prompt_of(6, 1), 6);  // 12 tokens: 3 blocks, only 2 left: waits
  StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(h.sched.blocks().num_used(), 10);
  EXPECT_EQ(b.sequences[0].blocks.size(), 3u);  // the step sees the blocks its positions need
  for (int i = 0; i < 10; ++i) {
    h.step();
    EXPECT_EQ(h.sched.blocks().num_used(), 10);  // no growth: everything was reserved
    EXPECT_FALSE(h.sched.is_running(2));
  }
  h.run_all();
  EXPECT_EQ(h.out[1].tokens, reference(prompt_of(10), 30));
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(6, 1), 6));
  EXPECT_EQ(h.sched.preemptions(), 0);
}

TEST(Scheduler, PreemptsTheLatestAdmittedAndRecomputesItExactly) {
  SchedulerConfig c = base_config();
  c.num_kv_blocks = 6;  // 24 token slots for two sequences growing to 20 each
  Harness h(c);
  h.add(1, prompt_of(4, 1), 16);
  h.add(2, prompt_of(4, 2), 16);
  bool saw_preempted = false;
  for (int i = 0; i < 200 && h.sched.has_work(); ++i) {
    const auto before = h.sched.preemptions();
    h.step();
    if (h.sched.preemptions() > before && !saw_preempted) {
      saw_preempted = true;
      EXPECT_TRUE(h.sched.is_running(1));   // the earlier one keeps going
      EXPECT_FALSE(h.sched.is_running(2));  // the later one went back to the queue
      EXPECT_EQ(h.sched.computed_of(2), 0);
      EXPECT_GT(h.sched.tokens_of(2).size(), 4u);  // and keeps what it generated
    }
  }
  EXPECT_TRUE(saw_preempted);
  EXPECT_GT(h.sched.preemptions(), 0);
  h.run_all();
  EXPECT_EQ(h.out[1].tokens, reference(prompt_of(4, 1), 16));
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(4, 2), 16));  // exact after recomputation
}

TEST(Scheduler, ASequenceTooBigForThePoolEndsWithAnError) {
  SchedulerConfig c = base_config();
  c.num_kv_blocks = 2;  // 8 token slots
  Harness h(c);
  h.add(1, prompt_of(9), 2);      // the prompt alone needs 3 blocks
  h.add(2, prompt_of(4, 1), 10);  // grows past 8 tokens after 4 generated
  h.run_all();
  EXPECT_EQ(h.out[1].reason, FinishReason::error);
  EXPECT_TRUE(h.out[1].tokens.empty());
  EXPECT_NE(h.out[1].error.find("KV blocks"), std::string::npos);
  EXPECT_EQ(h.out[2].reason, FinishReason::error);
  const auto ref = reference(prompt_of(4, 1), 10);
  ASSERT_EQ(h.out[2].tokens.size(), 5u);  // 4 + 5 = 9 tokens: the 9th needed a third block
  EXPECT_TRUE(std::equal(h.out[2].tokens.begin(), h.out[2].tokens.end(), ref.begin()));
}

TEST(Scheduler, StopTokensEosAndIgnoreEos) {
  const auto prompt = prompt_of(5, 9);
  const auto ref = reference(prompt, 8);
  SchedulerConfig c = base_config();
  c.eos_token_id = ref[1];
  Harness h(c);
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = 8;
  ASSERT_EQ(h.sched.add(1, r), AddStatus::accepted);  // ends on eos, the 2nd token
  r.ignore_eos = true;
  ASSERT_EQ(h.sched.add(2, r), AddStatus::accepted);  // runs to max_tokens
  r.stop_token_ids = {ref[3]};
  ASSERT_EQ(h.sched.add(3, r), AddStatus::accepted);  // a stop id still stops it
  h.run_all();
  EXPECT_EQ(h.out[1].tokens, std::vector<TokenId>(ref.begin(), ref.begin() + 2));
  EXPECT_EQ(h.out[1].reason, FinishReason::stop);
  EXPECT_EQ(h.out[2].tokens, ref);
  EXPECT_EQ(h.out[2].reason, FinishReason::length);
  EXPECT_EQ(h.out[3].tokens, std::vector<TokenId>(ref.begin(), ref.begin() + 4));
  EXPECT_EQ(h.out[3].reason, FinishReason::stop);
}

TEST(Scheduler, CancelFreesBlocksAtAnyTime) {
  Harness h(base_config());
  h.add(1, prompt_of(30), 10);
  h.add(2, prompt_of(4, 1), 10);
  h.add(3, prompt_of(4, 2), 10);
  h.step();
  EXPECT_GT(h.sched.blocks().num_used(), 0);
  EXPECT_TRUE(h.sched.cancel(1));  // running, half prefilled
  EXPECT_TRUE(h.sched.cancel(3));  // still waiting
  EXPECT_FALSE(h.sched.cancel(3));
  EXPECT_FALSE(h.sched.cancel(99));
  h.collect();
  EXPECT_EQ(h.out[1].reason, FinishReason::cancelled);
  EXPECT_EQ(h.out[3].reason, FinishReason::cancelled);
  EXPECT_FALSE(h.sched.blocks().has_sequence(1));
  StepBatch b = h.sched.schedule();
  EXPECT_THROW(h.sched.cancel(2), std::logic_error);  // never while the runner writes its blocks
  h.sched.on_step_done(h.runner.step(b));
  h.collect();
  h.run_all();
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(4, 1), 10));
}

TEST(Scheduler, ARunnerFailureEndsTheStepsSequencesWithAnError) {
  Harness h(base_config());
  h.add(1, prompt_of(4), 10);
  h.step();
  h.add(2, prompt_of(4, 1), 10);
  (void)h.sched.schedule();
  h.sched.on_step_failed("boom");
  h.collect();
  EXPECT_EQ(h.out[1].reason, FinishReason::error);
  EXPECT_EQ(h.out[1].error, "boom");
  EXPECT_EQ(h.out[2].reason, FinishReason::error);
  EXPECT_EQ(h.sched.blocks().num_used(), 0);
  EXPECT_FALSE(h.sched.has_work());
  // A result with a missing token fails the step the same way.
  h.add(3, prompt_of(4, 2), 10);
  (void)h.sched.schedule();
  h.sched.on_step_done(StepResult{});
  h.collect();
  EXPECT_EQ(h.out[3].reason, FinishReason::error);
}

TEST(Scheduler, QueueLimitCountsOnlyNeverAdmittedRequests) {
  SchedulerConfig c = base_config();
  c.max_waiting = 2;
  c.max_running = 1;
  Harness h(c);
  h.add(1, prompt_of(4), 5);
  h.add(2, prompt_of(4), 5);
  GenerationRequest r;
  r.prompt = prompt_of(4);
  EXPECT_EQ(h.sched.add(3, r), AddStatus::queue_full);
  h.step();  // 1 admitted: one slot frees up in the queue
  EXPECT_EQ(h.sched.add(3, r), AddStatus::accepted);
  EXPECT_EQ(h.sched.add(4, r), AddStatus::queue_full);
}

TEST(Scheduler, TheLatestAdmittedYieldsItselfRatherThanAnEarlierOne) {
  SchedulerConfig c = base_config();
  c.num_kv_blocks = 3;
  Harness h(c);
  h.add(1, prompt_of(4, 1), 8);
  h.add(2, prompt_of(4, 2), 8);
  h.step();  // both prefilled: one block each, one free
  ASSERT_EQ(h.sched.blocks().num_free(), 1);
  StepBatch b = h.step();  // 1's decode takes the free block; 2 needs one and is the latest
  EXPECT_EQ(h.sched.preemptions(), 1);
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(b.sequences[0].id, 1);
  EXPECT_TRUE(h.sched.is_running(1));
  EXPECT_FALSE(h.sched.is_running(2));
  h.run_all();
  EXPECT_EQ(h.out[1].tokens, reference(prompt_of(4, 1), 8));
  EXPECT_EQ(h.out[2].tokens, reference(prompt_of(4, 2), 8));
}

TEST(Scheduler, FakeRunnerRefusesABlockInTwoTablesOrASlotWrittenTwice) {
  StepBatch b;
  b.block_size = 4;
  b.sequences.push_back({1, {5, 6}, 0, {2}, true});
  b.sequences.push_back({2, {7}, 2, {2}, false});  // block 2 also in sequence 2's table
  FakeRunnerOptions o{4, 4, 16, kVocab, 64};
  FakeRunner strict(o);
  EXPECT_THROW((void)strict.step(b), aisp::UsageError);
  o.allow_shared_blocks = true;  // a prefix cache may share blocks, but not slots
  FakeRunner shared(o);
  EXPECT_EQ(shared.step(b).sampled.size(), 1u);  // disjoint slots: fine
  b.sequences[1].start_position = 1;             // slot 1: written by sequence 1 as well
  EXPECT_THROW((void)shared.step(b), aisp::UsageError);
}
