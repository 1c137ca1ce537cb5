// Speculative decoding inside the scheduler (SchedulerConfig::drafter, scheduler_speculative.cpp),
// the FakeRunner computing every step. The tokens and finish reasons must be plain greedy
// decoding's (fake_reference, and the same workload with speculation off) for: a varied batch with
// prompt lookup; stop ids and eos inside an accepted run; max_tokens and max_context (the drafter's
// max_draft is checked against them); memory pressure with preemption; prefix caching (no block
// published before all its slots are verified). A draft model that is always right (ModelDrafter
// over a copy of the runner) yields k + 1 tokens a step, a drafter that is always wrong one token a
// verification, with the acceptance counters to match. A short budget or short blocks cut drafts,
// never decodes, and preempt nobody. The drafter is released as sequences end, and one that fails
// fails only the sequences it was asked for. Through the EngineLoop: the same tokens, and the
// counters in EngineStats and /metrics.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <thread>

#include "core/base/error.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/http_server.hpp"
#include "serving/metrics.hpp"
#include "serving/scheduler.hpp"
#include "serving/speculative.hpp"

using namespace aisp::serving;

namespace {

using Ids = std::vector<TokenId>;

constexpr int kVocab = 1000;

// A drafter that knows the FakeRunner's next token (fake_next_token), for exact expectations.
// oracle: the true continuation; wrong: a first draft that never is; half: the true continuation
// with some positions (a hash of the position) spoiled, so that runs are partly accepted. It
// proposes `overshoot` tokens more than asked, which the scheduler must cut. It logs what it was
// asked and every release, and can be made to throw at one call.
class ScriptedDrafter final : public Drafter {
 public:
  enum class Mode { oracle, wrong, half };
  struct Ask {
    SequenceId id;
    int length;
    int max_draft;
  };

  ScriptedDrafter(Mode mode, int vocab, int overshoot = 0)
      : m_mode(mode), m_vocab(vocab), m_overshoot(overshoot) {}

  std::vector<Ids> propose(std::span<const DraftRequest> requests) override {
    if (++calls == throw_at_call) throw std::runtime_error("scripted failure");
    std::vector<Ids> out;
    for (const DraftRequest& r : requests) {
      asks.push_back({r.id, static_cast<int>(r.tokens.size()), r.max_draft});
      Ids history(r.tokens.begin(), r.tokens.end());
      Ids draft;
      for (int i = 0; i < r.max_draft + m_overshoot; ++i) {
        TokenId t = fake_next_token(history, m_vocab);
        const bool spoil = (m_mode == Mode::wrong && i == 0) ||
                           (m_mode == Mode::half && (history.size() * 2654435761U >> 5) % 3 == 0);
        if (spoil) t = (t + 1) % m_vocab;
        draft.push_back(t);
        history.push_back(t);
      }
      out.push_back(std::move(draft));
    }
    return out;
  }
  void release(SequenceId id) override { ++releases[id]; }

  int calls = 0;
  int throw_at_call = -1;
  std::vector<Ask> asks;
  std::map<SequenceId, int> releases;

 private:
  Mode m_mode;
  int m_vocab;
  int m_overshoot;
};

struct Outcome {
  Ids tokens;
  FinishReason reason = FinishReason::none;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

SchedulerConfig config(int vocab = kVocab) {
  SchedulerConfig c;
  c.max_running = 16;
  c.max_batched_tokens = 64;
  c.num_kv_blocks = 128;
  c.block_size = 4;
  c.max_context = 256;
  c.vocab_size = vocab;
  return c;
}

FakeRunnerOptions runner_options(const SchedulerConfig& c) {
  FakeRunnerOptions o;
  o.num_kv_blocks = c.num_kv_blocks;
  o.block_size = c.block_size;
  o.max_batched_tokens = c.max_batched_tokens;
  o.vocab_size = c.vocab_size;
  o.max_context = c.max_context;
  o.allow_shared_blocks = c.prefix_cache;
  return o;
}

// A scheduler and its runner, stepped by hand; every step checks the block bookkeeping and that
// the prefix cache holds no block with a slot at or past its sequence's `computed`.
struct Harness {
  Scheduler sched;
  FakeRunner runner;
  std::map<SequenceId, Outcome> out;
  std::vector<SequenceId> ids;

  explicit Harness(const SchedulerConfig& c) : sched(c), runner(runner_options(c)) {}

  void add(SequenceId id, const GenerationRequest& r) {
    ASSERT_EQ(sched.add(id, r), AddStatus::accepted);
    ids.push_back(id);
  }
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
  StepBatch step() {
    StepBatch b = sched.schedule();
    collect();
    if (!b.sequences.empty()) sched.on_step_done(runner.step(b));
    collect();
    EXPECT_EQ(sched.blocks().check_invariants(), "");
    check_published_blocks();
    return b;
  }
  void check_published_blocks() const {
    const PrefixCache* cache = sched.blocks().prefix_cache();
    if (cache == nullptr) return;
    const int bs = sched.config().block_size;
    for (const SequenceId id : ids) {
      if (!sched.is_running(id)) continue;
      const auto& table = sched.blocks().block_table(id);
      for (std::size_t i = 0; i < table.size(); ++i) {
        if (cache->is_cached(table[i])) {
          EXPECT_LE(static_cast<int>(i + 1) * bs, sched.computed_of(id))
              << "sequence " << id << " block " << i << " published with unverified slots";
        }
      }
    }
  }
};

struct WorkloadRun {
  std::map<SequenceId, Outcome> out;
  std::int64_t steps = 0;
  std::int64_t preemptions = 0;
  AcceptanceStats stats;
  PrefixCacheStats prefix;
  int most_drafts = 0;  // in one step
};

// Request i (id i + 1) arrives before step arrivals[i] (all before the first when empty); runs
// until nothing is left.
WorkloadRun run_workload(SchedulerConfig c, const std::vector<GenerationRequest>& rs,
                         Drafter* drafter, const std::vector<int>& arrivals = {}) {
  c.drafter = drafter;
  Harness h(c);
  WorkloadRun r;
  std::size_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    while (next < rs.size() && (arrivals.empty() || arrivals[next] <= step)) {
      h.add(static_cast<SequenceId>(next + 1), rs[next]);
      ++next;
    }
    if (next == rs.size() && !h.sched.has_work()) break;
    h.step();
    r.most_drafts = std::max(r.most_drafts, h.sched.last_composition().draft_tokens);
  }
  EXPECT_FALSE(h.sched.has_work());
  EXPECT_EQ(h.sched.blocks().num_used(), 0);
  for (const auto& [id, o] : h.out) r.out[id] = o;
  r.steps = h.runner.steps();
  r.preemptions = h.sched.preemptions();
  r.stats = h.sched.acceptance_stats();
  r.prefix = h.sched.prefix_cache_stats();
  return r;
}

// Speculation changes nothing but the step count: every request gets fake_reference's tokens and
// reason, and the same as with speculation off.
void expect_plain_decoding(const WorkloadRun& spec, const SchedulerConfig& c,
                           const std::vector<GenerationRequest>& rs,
                           const std::vector<int>& arrivals = {}) {
  ASSERT_EQ(spec.out.size(), rs.size());
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const FakeGeneration ref = fake_reference(rs[i], c.vocab_size, c.eos_token_id, c.max_context);
    const Outcome& o = spec.out.at(static_cast<SequenceId>(i + 1));
    EXPECT_EQ(o.tokens, ref.tokens) << "request " << i;
    EXPECT_EQ(o.reason, ref.reason) << "request " << i;
  }
  const WorkloadRun plain = run_workload(c, rs, nullptr, arrivals);
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_EQ(plain.stats.verifications(), 0);
}

GenerationRequest request(Ids prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

Ids prompt_of(int n, int seed, int vocab = kVocab) {
  Ids p;
  for (int i = 0; i < n; ++i) p.push_back((seed * 131 + i * 17 + 3) % vocab);
  return p;
}

}  // namespace

TEST(SchedulerSpeculative, NeedsContinuousPagedKvAndAPositiveK) {
  PromptLookupDrafter drafter;
  SchedulerConfig c = config();
  c.drafter = &drafter;
  c.policy = SchedulingPolicy::static_batch;
  EXPECT_THROW((Scheduler{c}), aisp::UsageError);
  c = config();
  c.drafter = &drafter;
  c.kv_mode = KvMode::reserved;
  EXPECT_THROW((Scheduler{c}), aisp::UsageError);
  c = config();
  c.drafter = &drafter;
  c.num_draft = 0;
  EXPECT_THROW((Scheduler{c}), aisp::UsageError);
  c.num_draft = 1;
  EXPECT_TRUE(Scheduler{c}.speculative());
  c.drafter = nullptr;
  c.num_draft = 0;  // not looked at when off
  EXPECT_FALSE(Scheduler{c}.speculative());
}

TEST(SchedulerSpeculative, PromptLookupOnAVariedBatchGivesThePlainTokens) {
  // A small vocabulary: n-grams recur and the FakeRunner's tokens match a draft now and then.
  constexpr int kSmall = 12;
  SchedulerConfig c = config(kSmall);
  c.max_batched_tokens = 40;
  std::vector<GenerationRequest> rs;
  std::vector<int> arrivals;
  for (int i = 0; i < 24; ++i) {
    Ids prompt;
    const int len = 1 + (i * 7) % 30;
    for (int t = 0; t < len; ++t)
      prompt.push_back(i % 3 == 0 ? t % (2 + i % 4) : (i * 5 + t * t) % kSmall);
    rs.push_back(request(prompt, 1 + (i * 11) % 45));
    arrivals.push_back(i * 2);
  }
  PromptLookupDrafter drafter(PromptLookupOptions{1, 3, 4});
  c.num_draft = 4;
  const WorkloadRun spec = run_workload(c, rs, &drafter, arrivals);
  expect_plain_decoding(spec, c, rs, arrivals);
  const AcceptanceStats& s = spec.stats;
  EXPECT_GT(s.verifications(), 50);
  EXPECT_GT(s.accepted(), 0);
  EXPECT_LT(s.accepted(), s.proposed());
  EXPECT_LE(s.emitted(), s.accepted() + s.verifications());
  EXPECT_GE(s.emitted(), s.verifications());
  EXPECT_GT(spec.most_drafts, 0);
}

TEST(SchedulerSpeculative, ADraftModelCopyIsAlwaysAcceptedAndTakesKPlusOneTokensAStep) {
  SchedulerConfig c = config();
  FakeRunner draft_runner(runner_options(c));
  ModelDrafter drafter(draft_runner);
  c.num_draft = 4;
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(request(prompt_of(5 + 5 * i, i), 41));
  const WorkloadRun spec = run_workload(c, rs, &drafter);
  expect_plain_decoding(spec, c, rs);
  // One step prefills all four prompts (50 tokens) and samples each one's first token; the other 40
  // come 5 a verification (4 drafts + the bonus token).
  EXPECT_EQ(spec.steps, 1 + 40 / 5);
  EXPECT_EQ(spec.stats.verifications(), 4 * 8);
  EXPECT_EQ(spec.stats.proposed(), 4 * 8 * 4);
  EXPECT_EQ(spec.stats.accepted(), spec.stats.proposed());
  EXPECT_EQ(spec.stats.emitted(), 4 * 40);
  EXPECT_DOUBLE_EQ(spec.stats.acceptance_rate(), 1.0);
  EXPECT_DOUBLE_EQ(spec.stats.tokens_per_verification(), 5.0);
  EXPECT_EQ(run_workload(c, rs, nullptr).steps, 41);
  // Every sequence ended: the draft model holds no KV.
  EXPECT_EQ(drafter.blocks().num_used(), 0);
}

TEST(SchedulerSpeculative, AnAlwaysWrongDrafterCostsOnlySpeed) {
  SchedulerConfig c = config();
  ScriptedDrafter drafter(ScriptedDrafter::Mode::wrong, kVocab);
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(request(prompt_of(5 + 5 * i, i), 41));
  const WorkloadRun spec = run_workload(c, rs, &drafter);
  expect_plain_decoding(spec, c, rs);
  EXPECT_EQ(spec.steps, 41);  // as plain decoding: one token a step
  // Drafts are asked for while two tokens may still come (generated 1 to 39), min(4, 40 - g) each;
  // the last token is a plain decode.
  EXPECT_EQ(spec.stats.verifications(), 4 * 39);
  EXPECT_EQ(spec.stats.proposed(), 4 * (36 * 4 + 3 + 2 + 1));
  EXPECT_EQ(spec.stats.accepted(), 0);
  EXPECT_EQ(spec.stats.emitted(), spec.stats.verifications());
}

TEST(SchedulerSpeculative, StopIdsAndEosInsideAnAcceptedRunEndTheSequenceThere) {
  SchedulerConfig c = config();
  const Ids p1 = prompt_of(9, 1);
  const Ids p2 = prompt_of(6, 2);
  const FakeGeneration ref1 = fake_reference(request(p1, 30), kVocab);
  const FakeGeneration ref2 = fake_reference(request(p2, 30), kVocab);
  // The 7th token of the first and the 4th of the second, each its first occurrence.
  ASSERT_EQ(std::find(ref1.tokens.begin(), ref1.tokens.begin() + 6, ref1.tokens[6]) -
                ref1.tokens.begin(),
            6);
  ASSERT_EQ(std::find(ref2.tokens.begin(), ref2.tokens.begin() + 3, ref2.tokens[3]) -
                ref2.tokens.begin(),
            3);
  c.eos_token_id = ref2.tokens[3];
  GenerationRequest stop = request(p1, 30);
  stop.stop_token_ids = {ref1.tokens[6]};
  GenerationRequest ignoring = request(p2, 30);
  ignoring.ignore_eos = true;
  const std::vector<GenerationRequest> rs{stop, request(p2, 30), ignoring};
  ScriptedDrafter drafter(ScriptedDrafter::Mode::oracle, kVocab, /*overshoot=*/3);
  const WorkloadRun spec = run_workload(c, rs, &drafter);
  expect_plain_decoding(spec, c, rs);
  EXPECT_EQ(spec.out.at(1).reason, FinishReason::stop);
  EXPECT_EQ(spec.out.at(1).tokens.size(), 7u);
  EXPECT_EQ(spec.out.at(2).reason, FinishReason::stop);
  EXPECT_EQ(spec.out.at(2).tokens.size(), 4u);
  EXPECT_EQ(spec.out.at(3).reason, FinishReason::length);
  EXPECT_EQ(spec.out.at(3).tokens.size(), 30u);
  // Every draft was right, yet two verifications emitted less than accepted + 1: the cuts.
  EXPECT_EQ(spec.stats.accepted(), spec.stats.proposed());
  EXPECT_LT(spec.stats.emitted(), spec.stats.accepted() + spec.stats.verifications());
  for (const auto& [id, n] : drafter.releases) EXPECT_EQ(n, 1) << "sequence " << id;
  EXPECT_EQ(drafter.releases.size(), 3u);
}

TEST(SchedulerSpeculative, MaxTokensAndMaxContextBoundTheDrafts) {
  SchedulerConfig c = config();
  c.max_context = 48;  // the runner refuses any position past it
  c.num_draft = 4;
  std::vector<GenerationRequest> rs{request(prompt_of(40, 1), 8), request(prompt_of(10, 2), 38),
                                    request(prompt_of(3, 3), 1),  request(prompt_of(4, 4), 2),
                                    request(prompt_of(5, 5), 3),  request(prompt_of(6, 6), 6),
                                    request(prompt_of(7, 7), 7)};
  // The drafter proposes 5 more than asked: the scheduler must cut them.
  ScriptedDrafter drafter(ScriptedDrafter::Mode::oracle, kVocab, /*overshoot=*/5);
  const WorkloadRun spec = run_workload(c, rs, &drafter);
  expect_plain_decoding(spec, c, rs);
  ASSERT_FALSE(drafter.asks.empty());
  for (const auto& ask : drafter.asks) {
    const GenerationRequest& r = rs[static_cast<std::size_t>(ask.id - 1)];
    const int prompt = static_cast<int>(r.prompt.size());
    const int max_emit = std::min(r.max_tokens - (ask.length - prompt), c.max_context - ask.length);
    EXPECT_EQ(ask.max_draft, std::min(c.num_draft, max_emit - 1)) << "sequence " << ask.id;
    EXPECT_GT(ask.max_draft, 0);
  }
  for (std::size_t i = 0; i < rs.size(); ++i)
    EXPECT_EQ(spec.out.at(static_cast<SequenceId>(i + 1)).tokens.size(),
              static_cast<std::size_t>(rs[i].max_tokens));
}

TEST(SchedulerSpeculative, MemoryPressurePreemptsAndKeepsTheTokens) {
  SchedulerConfig c = config();
  c.num_kv_blocks = 16;  // 64 slots for 8 sequences of up to 50 tokens
  c.max_running = 8;
  c.max_batched_tokens = 32;
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 8; ++i) rs.push_back(request(prompt_of(6 + 2 * i, i), 12 + 2 * i));
  ScriptedDrafter drafter(ScriptedDrafter::Mode::half, kVocab);
  const WorkloadRun spec = run_workload(c, rs, &drafter);
  expect_plain_decoding(spec, c, rs);
  EXPECT_GT(spec.preemptions, 0);
  EXPECT_GT(spec.stats.accepted(), 0);
  EXPECT_LT(spec.stats.accepted(), spec.stats.proposed());
  // Preemption does not end a sequence: one release each, when it finished.
  EXPECT_EQ(drafter.releases.size(), rs.size());
  for (const auto& [id, n] : drafter.releases) EXPECT_EQ(n, 1) << "sequence " << id;
}

TEST(SchedulerSpeculative, ShortBlocksCutTheDraftsBeforeAnyPreemption) {
  for (const int blocks : {4, 6}) {
    SchedulerConfig c = config();
    c.num_kv_blocks = blocks;
    ScriptedDrafter drafter(ScriptedDrafter::Mode::oracle, kVocab);
    c.drafter = &drafter;
    Harness h(c);
    const std::vector<GenerationRequest> rs{request(prompt_of(7, 1), 6),
                                            request(prompt_of(7, 2), 6)};
    h.add(1, rs[0]);
    h.add(2, rs[1]);
    h.step();  // both prompts: 2 blocks each
    const StepBatch b = h.step();
    ASSERT_EQ(b.sequences.size(), 2u) << blocks << " blocks";
    EXPECT_EQ(h.sched.preemptions(), 0);
    for (const auto& s : b.sequences) {
      // 4 blocks: position 7 still fits the second block, a draft would need a fifth: none. 6:
      // room for both sequences' drafts.
      EXPECT_EQ(s.sample_all, blocks == 6) << blocks << " blocks";
      EXPECT_EQ(s.tokens.size(), blocks == 6 ? 5u : 1u);
    }
    for (int i = 0; i < 100 && h.sched.has_work(); ++i) h.step();
    ASSERT_FALSE(h.sched.has_work());
    for (const std::size_t i : {0U, 1U})
      EXPECT_EQ(h.out[static_cast<SequenceId>(i + 1)].tokens, fake_reference(rs[i], kVocab).tokens);
  }
}

TEST(SchedulerSpeculative, AShortBudgetCutsTheDraftsNotTheDecodes) {
  SchedulerConfig c = config();
  c.max_batched_tokens = 8;
  ScriptedDrafter drafter(ScriptedDrafter::Mode::oracle, kVocab);
  c.drafter = &drafter;
  Harness h(c);
  std::vector<GenerationRequest> rs;
  for (SequenceId id = 1; id <= 4; ++id) {
    rs.push_back(request(prompt_of(2, static_cast<int>(id)), 20));
    h.add(id, rs.back());
  }
  int steps_with_drafts = 0;
  while (h.sched.has_work()) {
    std::vector<SequenceId> decoding;
    for (SequenceId id = 1; id <= 4; ++id) {
      if (h.sched.is_running(id) &&
          static_cast<int>(h.sched.tokens_of(id).size()) - h.sched.computed_of(id) == 1)
        decoding.push_back(id);
    }
    const StepBatch b = h.step();
    EXPECT_LE(b.token_count(), 8);
    for (SequenceId id : decoding) {
      EXPECT_TRUE(std::any_of(b.sequences.begin(), b.sequences.end(),
                              [&](const ScheduledSequence& s) { return s.id == id; }))
          << "sequence " << id << " lost its decode to drafts";
    }
    if (decoding.size() == 4 && h.sched.last_composition().draft_tokens > 0) ++steps_with_drafts;
  }
  EXPECT_GT(steps_with_drafts, 0);  // 4 decodes leave 4 tokens of the budget: drafts for one
  for (std::size_t i = 0; i < rs.size(); ++i)
    EXPECT_EQ(h.out[static_cast<SequenceId>(i + 1)].tokens, fake_reference(rs[i], kVocab).tokens);
}

TEST(SchedulerSpeculative, PrefixCachingPublishesOnlyVerifiedBlocks) {
  SchedulerConfig c = config();
  c.prefix_cache = true;
  c.max_batched_tokens = 32;
  const Ids system = prompt_of(10, 9);
  std::vector<GenerationRequest> rs;
  std::vector<int> arrivals;
  for (int i = 0; i < 6; ++i) {
    Ids p = system;
    for (TokenId t : prompt_of(3 + i, 20 + i)) p.push_back(t);
    rs.push_back(request(p, 10 + 3 * i));
    arrivals.push_back(3 * i);
  }
  // A second turn of the first chat after it ended: its history is the first prompt and output.
  Ids turn2 = rs[0].prompt;
  for (TokenId t : fake_reference(rs[0], kVocab).tokens) turn2.push_back(t);
  const int history = static_cast<int>(turn2.size());
  for (TokenId t : prompt_of(5, 40)) turn2.push_back(t);
  rs.push_back(request(turn2, 12));
  arrivals.push_back(120);
  ScriptedDrafter drafter(ScriptedDrafter::Mode::half, kVocab);
  // The harness checks the published blocks after every step.
  const WorkloadRun spec = run_workload(c, rs, &drafter, arrivals);
  expect_plain_decoding(spec, c, rs, arrivals);
  EXPECT_GT(spec.stats.accepted(), 0);
  // The first chat's output was computed by verifications; its full blocks were registered all the
  // same (its last token has no K/V), so the second turn finds them, with the system prompt's.
  const int bs = c.block_size;
  const int system_hits = 5 * (10 / bs * bs);
  EXPECT_GE(spec.prefix.hit_tokens, system_hits + (history - 1) / bs * bs);
}

TEST(SchedulerSpeculative, CancelAndFinishReleaseTheDrafter) {
  SchedulerConfig c = config();
  ScriptedDrafter drafter(ScriptedDrafter::Mode::half, kVocab);
  c.drafter = &drafter;
  Harness h(c);
  const GenerationRequest r1 = request(prompt_of(5, 1), 40);
  h.add(1, r1);
  h.add(2, request(prompt_of(6, 2), 10));
  for (int i = 0; i < 4; ++i) h.step();
  EXPECT_EQ(drafter.releases.count(1), 0u);
  ASSERT_TRUE(h.sched.cancel(1));
  h.collect();
  EXPECT_EQ(drafter.releases[1], 1);
  EXPECT_EQ(h.out[1].reason, FinishReason::cancelled);
  const Ids ref = fake_reference(r1, kVocab).tokens;
  ASSERT_LE(h.out[1].tokens.size(), ref.size());
  EXPECT_TRUE(std::equal(h.out[1].tokens.begin(), h.out[1].tokens.end(), ref.begin()));
  for (int i = 0; i < 100 && h.sched.has_work(); ++i) h.step();
  EXPECT_EQ(drafter.releases[2], 1);
  EXPECT_EQ(h.sched.blocks().num_used(), 0);
}

TEST(SchedulerSpeculative, AFailingDrafterFailsOnlyTheSequencesItWasAskedFor) {
  SchedulerConfig c = config();
  ScriptedDrafter drafter(ScriptedDrafter::Mode::oracle, kVocab);
  drafter.throw_at_call = 2;
  const std::vector<GenerationRequest> rs{request(prompt_of(5, 1), 30),
                                          request(prompt_of(6, 2), 30),
                                          request(prompt_of(7, 3), 12)};
  // Steps 0 and 1: prefill and the first verification of 1 and 2; the drafter throws at step 2,
  // before request 3 arrives.
  const WorkloadRun spec = run_workload(c, rs, &drafter, {0, 0, 5});
  for (SequenceId id : {1, 2}) {
    EXPECT_EQ(spec.out.at(id).reason, FinishReason::error);
    EXPECT_NE(spec.out.at(id).error.find("drafter failed: scripted failure"), std::string::npos)
        << spec.out.at(id).error;
    EXPECT_EQ(drafter.releases[id], 1);
  }
  EXPECT_EQ(spec.out.at(3).tokens, fake_reference(rs[2], kVocab).tokens);
  EXPECT_EQ(spec.out.at(3).reason, FinishReason::length);
}

// ---- through the EngineLoop ----

namespace {

struct Collected {
  Ids tokens;
  FinishReason reason = FinishReason::none;
};

// Submits every request at once and waits for all; tokens per request, in order.
std::vector<Collected> serve_all(EngineLoop& engine, const std::vector<GenerationRequest>& rs) {
  std::vector<Collected> got(rs.size());
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const SubmitResult s = engine.submit(rs[i], [&got, i](const TokenEvent& e) {
      if (e.token >= 0) got[i].tokens.push_back(e.token);
      if (e.finished) got[i].reason = e.reason;
    });
    EXPECT_EQ(s.status, SubmitStatus::accepted) << s.message;
  }
  engine.drain();
  return got;
}

}  // namespace

TEST(SchedulerSpeculative, EngineLoopUnderMemoryPressureGivesThePlainTokens) {
  constexpr int kSmall = 50;
  SchedulerConfig c;
  c.max_running = 12;
  c.block_size = 8;
  c.eos_token_id = 7;
  FakeRunnerOptions ro;
  ro.num_kv_blocks = 30;
  ro.block_size = 8;
  ro.max_batched_tokens = 48;
  ro.vocab_size = kSmall;
  ro.max_context = 128;
  FakeRunner runner(ro);
  ScriptedDrafter drafter(ScriptedDrafter::Mode::half, kSmall);
  c.drafter = &drafter;
  c.num_draft = 3;
  EngineLoop engine(runner, c);
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 60; ++i) {
    GenerationRequest r = request(prompt_of(1 + (i * 13) % 60, i, kSmall), 1 + (i * 7) % 50);
    r.ignore_eos = i % 3 == 0;
    if (i % 5 == 0) r.stop_token_ids = {static_cast<TokenId>(i % kSmall)};
    rs.push_back(std::move(r));
  }
  const std::vector<Collected> got = serve_all(engine, rs);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const FakeGeneration ref = fake_reference(rs[i], kSmall, c.eos_token_id, ro.max_context);
    EXPECT_EQ(got[i].tokens, ref.tokens) << "request " << i;
    EXPECT_EQ(got[i].reason, ref.reason) << "request " << i;
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.preemptions, 0);
  EXPECT_TRUE(s.speculative);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
}

TEST(SchedulerSpeculative, MetricsCarryTheAcceptanceCounters) {
  FakeRunnerOptions ro;
  FakeRunner runner(ro);
  FakeRunner draft_runner(ro);
  ModelDrafter drafter(draft_runner);
  SchedulerConfig c;
  c.drafter = &drafter;
  c.num_draft = 4;
  EngineLoop engine(runner, c, "fake");
  ServerOptions so;
  so.port = 0;
  so.threads = 4;
  so.keep_alive_timeout_s = 1;
  HttpServer server(engine, so);
  server.start();
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_read_timeout(10);
  const auto before = parse_prometheus_text(cli.Get("/metrics")->body);
  EXPECT_EQ(before.types.at("aisp_spec_decode_verifications_total"), "counter");
  EXPECT_EQ(before.value("aisp_spec_decode_draft_tokens_total"), 0);
  for (int i = 0; i < 3; ++i) {
    const auto r = cli.Post("/v1/completions", R"({"prompt":[3,4,5],"max_tokens":11})",
                            "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  for (int i = 0; i < 200 && engine.stats().requests_finished < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto after = parse_prometheus_text(cli.Get("/metrics")->body);
  // Each request, alone in the engine: the prefill samples a token, then two verifications of 4
  // drafts emit 5 each.
  EXPECT_EQ(after.value("aisp_spec_decode_verifications_total"), 3 * 2);
  EXPECT_EQ(after.value("aisp_spec_decode_draft_tokens_total"), 3 * 8);
  EXPECT_EQ(after.value("aisp_spec_decode_accepted_tokens_total"), 3 * 8);
  EXPECT_EQ(after.value("aisp_spec_decode_emitted_tokens_total"), 3 * 10);
  EXPECT_EQ(after.value("aisp_engine_steps_total"), 3 * 3);
  EXPECT_EQ(after.value("aisp_generation_tokens_total"), 3 * 11);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.spec_verifications, 6);
  EXPECT_EQ(s.spec_emitted_tokens, 30);
  server.stop();

  // Without a drafter the series are absent rather than zeros.
  FakeRunner plain_runner(ro);
  EngineLoop plain(plain_runner, SchedulerConfig{}, "fake");
  HttpServer plain_server(plain, so);
  plain_server.start();
  httplib::Client plain_cli("127.0.0.1", plain_server.port());
  const auto off = parse_prometheus_text(plain_cli.Get("/metrics")->body);
  EXPECT_EQ(off.types.count("aisp_spec_decode_verifications_total"), 0u);
  EXPECT_FALSE(plain.stats().speculative);
  plain_server.stop();
}
