// Speculative decoding (serving/speculative.hpp): greedy verification (k = 0, all, none, part
// accepted, a stop id or max_tokens inside the accepted run, and a randomized check that the
// emitted tokens are plain greedy decoding's), the KV rollback, prompt lookup, acceptance
// accounting, the FakeRunner's sample_all, and generation with speculation through the FakeRunner
// against fake_reference() (plain greedy decoding) with prompt lookup, an oracle, an adversarial
// and a half-right drafter, and a draft model (ModelDrafter over a FakeRunner: a copy of the target,
// a perturbed one whose cache must roll back, one with too few KV blocks).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "core/base/error.hpp"
#include "serving/fake_runner.hpp"
#include "serving/speculative.hpp"

using namespace aisp::serving;

namespace {

using Ids = std::vector<TokenId>;

FinishRule open_rule() {
  FinishRule rule;
  rule.max_tokens = 1000;
  rule.max_context = 1 << 20;
  return rule;
}

}  // namespace

// ---- verification ----

TEST(SpeculativeVerify, NoDraftsIsAPlainDecode) {
  const Verification v = verify_greedy(Ids{}, Ids{42}, 9, open_rule(), 100);
  EXPECT_EQ(v.emitted, Ids{42});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.kv_valid,
            10);  // position 9 (the last token) became valid; 42 has no K/V yet
  EXPECT_EQ(v.finish, FinishReason::none);
}

TEST(SpeculativeVerify, AllAcceptedAddsTheBonusToken) {
  const Verification v = verify_greedy(Ids{5, 6, 7}, Ids{5, 6, 7, 8}, 20, open_rule(), 100);
  EXPECT_EQ(v.emitted, (Ids{5, 6, 7, 8}));
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.kv_valid, 24);  // 20 (last token) and 21..23 (the three drafts)
}

TEST(SpeculativeVerify, NoneAcceptedEmitsTheTargetsToken) {
  const Verification v = verify_greedy(Ids{1, 2, 3}, Ids{9, 2, 3, 4}, 20, open_rule(), 100);
  EXPECT_EQ(v.emitted, Ids{9});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.kv_valid, 21);  // every draft slot (21..23) is stale
}

TEST(SpeculativeVerify, StopsAtTheFirstMismatchEvenIfLaterDraftsMatch) {
  const Verification v = verify_greedy(Ids{1, 2, 3, 4}, Ids{1, 9, 3, 4, 5}, 0, open_rule(), 100);
  EXPECT_EQ(v.emitted, (Ids{1, 9}));
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.kv_valid, 2);
}

TEST(SpeculativeVerify, StopTokenInsideTheAcceptedRunEndsThere) {
  FinishRule rule = open_rule();
  rule.stop_token_ids = {6};
  const Verification v = verify_greedy(Ids{5, 6, 7}, Ids{5, 6, 7, 8}, 3, rule, 100);
  EXPECT_EQ(v.emitted, (Ids{5, 6}));  // never past the stop token
  EXPECT_EQ(v.finish, FinishReason::stop);
  EXPECT_EQ(v.accepted, 3);  // what the drafter earned, before the cut
  EXPECT_EQ(v.kv_valid, 5);
}

TEST(SpeculativeVerify, MaxTokensInsideTheAcceptedRunEndsThere) {
  const Verification v = verify_greedy(Ids{5, 6, 7}, Ids{5, 6, 7, 8}, 3, open_rule(), 2);
  EXPECT_EQ(v.emitted, (Ids{5, 6}));
  EXPECT_EQ(v.finish, FinishReason::length);
  const Verification exact = verify_greedy(Ids{5, 6, 7}, Ids{5, 6, 7, 8}, 3, open_rule(), 4);
  EXPECT_EQ(exact.emitted.size(), 4u);
  EXPECT_EQ(exact.finish, FinishReason::length);
}

TEST(SpeculativeVerify, StopWinsOverLengthOnTheSameTokenAndTheBonusCanStop) {
  FinishRule rule = open_rule();
  rule.eos_token_id = 8;
  EXPECT_EQ(verify_greedy(Ids{5}, Ids{8, 1}, 0, rule, 1).finish, FinishReason::stop);
  const Verification v = verify_greedy(Ids{5, 6, 7}, Ids{5, 6, 7, 8}, 0, rule, 100);
  EXPECT_EQ(v.emitted, (Ids{5, 6, 7, 8}));
  EXPECT_EQ(v.finish, FinishReason::stop);
}

TEST(SpeculativeVerify, FinishRuleFollowsTheRequest) {
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 10;
  r.stop_token_ids = {77};
  FinishRule rule = finish_rule_for(r, 2, 8);
  EXPECT_TRUE(rule.is_stop(77));
  EXPECT_TRUE(rule.is_stop(2));
  EXPECT_FALSE(rule.is_stop(3));
  EXPECT_EQ(rule.max_emit(0, 3), 5);  // the context (8) binds before max_tokens
  EXPECT_EQ(rule.max_emit(9, 4), 1);  // max_tokens binds
  EXPECT_EQ(rule.max_emit(10, 4), 0);
  r.ignore_eos = true;
  EXPECT_FALSE(finish_rule_for(r, 2, 8).is_stop(2));
}

TEST(SpeculativeVerify, RefusesBadInput) {
  EXPECT_THROW((void)verify_greedy(Ids{1, 2}, Ids{1, 2}, 0, open_rule(), 5), aisp::UsageError);
  EXPECT_THROW((void)verify_greedy(Ids{}, Ids{}, 0, open_rule(), 5), aisp::UsageError);
  EXPECT_THROW((void)verify_greedy(Ids{1}, Ids{1, 2}, -1, open_rule(), 5), aisp::UsageError);
  EXPECT_THROW((void)verify_greedy(Ids{1}, Ids{1, 2}, 0, open_rule(), 0), aisp::UsageError);
}

// Whatever the drafts, the emitted tokens are the greedy continuation of the history, and kv_valid
// counts exactly the positions whose tokens are in the new history.
TEST(SpeculativeVerify, EmitsExactlyWhatGreedyDecodingEmits) {
  constexpr int kVocab = 5;  // small: drafts are often right
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    Ids history(1 + rng() % 12);
    for (auto& t : history) t = static_cast<TokenId>(rng() % kVocab);
    const int k = static_cast<int>(rng() % 6);
    Ids draft;
    Ids target;
    Ids h = history;
    for (int i = 0; i < k; ++i) {
      target.push_back(fake_next_token(h, kVocab));
      draft.push_back(rng() % 3 == 0 ? static_cast<TokenId>(rng() % kVocab) : target.back());
      h.push_back(draft.back());
    }
    target.push_back(fake_next_token(h, kVocab));
    const int first = static_cast<int>(history.size()) - 1;
    const int max_emit = 1 + static_cast<int>(rng() % 8);
    const Verification v = verify_greedy(draft, target, first, open_rule(), max_emit);
    Ids greedy = history;
    for (TokenId t : v.emitted) {
      ASSERT_EQ(t, fake_next_token(greedy, kVocab)) << "trial " << trial;
      greedy.push_back(t);
    }
    ASSERT_EQ(v.emitted.size(), static_cast<std::size_t>(std::min(v.accepted + 1, max_emit)));
    ASSERT_EQ(v.kv_valid, static_cast<int>(greedy.size()) - 1);
  }
}

// ---- KV rollback ----

TEST(SpeculativeKv, RollBackKeepsTheBlocksOfValidPositions) {
  const std::vector<BlockId> table{7, 3, 9, 4};
  TableRollback r = roll_back_table(table, 33, 16);  // positions 0..32: blocks 0, 1, 2
  EXPECT_EQ(r.kept, (std::vector<BlockId>{7, 3, 9}));
  EXPECT_EQ(r.released, (std::vector<BlockId>{4}));
  r = roll_back_table(table, 32, 16);  // exactly two full blocks
  EXPECT_EQ(r.kept, (std::vector<BlockId>{7, 3}));
  EXPECT_EQ(r.released, (std::vector<BlockId>{9, 4}));
  r = roll_back_table(table, 0, 16);
  EXPECT_TRUE(r.kept.empty());
  EXPECT_EQ(r.released.size(), 4u);
  EXPECT_THROW((void)roll_back_table(table, 65, 16), aisp::UsageError);
  EXPECT_THROW((void)roll_back_table(table, -1, 16), aisp::UsageError);
  EXPECT_THROW((void)roll_back_table(table, 4, 0), aisp::UsageError);
}

// ---- prompt lookup ----

TEST(SpeculativePromptLookup, ProposesWhatFollowedTheLastNGram) {
  const PromptLookupOptions o{1, 3, 3};
  EXPECT_EQ(prompt_lookup(Ids{1, 2, 3, 4, 9, 1, 2, 3}, o, 10), (Ids{4, 9, 1}));
  EXPECT_EQ(prompt_lookup(Ids{1, 2, 3, 4, 9, 1, 2, 3}, o, 2), (Ids{4, 9}));  // max_draft caps
  EXPECT_TRUE(prompt_lookup(Ids{1, 2, 3, 4, 9, 1, 2, 3}, o, 0).empty());
  EXPECT_TRUE(prompt_lookup(Ids{1, 2, 3, 4}, o, 10).empty());  // nothing recurs
  EXPECT_TRUE(prompt_lookup(Ids{1}, o, 10).empty());
  EXPECT_TRUE(prompt_lookup(Ids{}, o, 10).empty());
  EXPECT_TRUE(prompt_lookup(Ids{1, 1, 1}, PromptLookupOptions{1, 3, 0}, 10).empty());
}

TEST(SpeculativePromptLookup, MostRecentOccurrenceWins) {
  EXPECT_EQ(prompt_lookup(Ids{1, 2, 5, 1, 2, 6, 1, 2}, PromptLookupOptions{1, 2, 2}, 10),
            (Ids{6, 1}));
}

TEST(SpeculativePromptLookup, LongestNGramFirstAndMinNGramRespected) {
  const Ids t{1, 2, 5, 3, 2, 6, 1, 2};
  EXPECT_EQ(prompt_lookup(t, PromptLookupOptions{1, 2, 2}, 10), (Ids{5, 3}));  // "1 2" at 0
  EXPECT_EQ(prompt_lookup(t, PromptLookupOptions{1, 1, 2}, 10), (Ids{6, 1}));  // "2" at 4
  EXPECT_TRUE(prompt_lookup(Ids{4, 3, 9, 3}, PromptLookupOptions{2, 3, 2}, 10).empty());
  EXPECT_EQ(prompt_lookup(Ids{4, 3, 9, 3}, PromptLookupOptions{1, 3, 2}, 10), (Ids{9, 3}));
}

TEST(SpeculativePromptLookup, ARepeatingPatternContinuesPastTheEnd) {
  EXPECT_EQ(prompt_lookup(Ids{4, 5, 4, 5}, PromptLookupOptions{1, 2, 5}, 10), (Ids{4, 5, 4, 5, 4}));
  EXPECT_EQ(prompt_lookup(Ids{7, 7, 7}, PromptLookupOptions{1, 3, 4}, 10), (Ids{7, 7, 7, 7}));
}

TEST(SpeculativePromptLookup, RefusesBadOptions) {
  EXPECT_THROW(validate(PromptLookupOptions{0, 3, 4}), aisp::UsageError);
  EXPECT_THROW(validate(PromptLookupOptions{3, 2, 4}), aisp::UsageError);
  EXPECT_THROW(validate(PromptLookupOptions{1, 3, -1}), aisp::UsageError);
  EXPECT_THROW(PromptLookupDrafter(PromptLookupOptions{2, 1, 4}), aisp::UsageError);
}

// ---- acceptance accounting ----

TEST(SpeculativeStats, CountsOverallAndPerPosition) {
  AcceptanceStats s;
  EXPECT_EQ(s.acceptance_rate(), 0.0);
  s.record(4, 4, 5);
  s.record(4, 1, 2);
  s.record(2, 0, 1);
  s.record(0, 0, 1);  // a plain decode
  EXPECT_EQ(s.verifications(), 4);
  EXPECT_EQ(s.proposed(), 10);
  EXPECT_EQ(s.accepted(), 5);
  EXPECT_EQ(s.emitted(), 9);
  EXPECT_DOUBLE_EQ(s.acceptance_rate(), 0.5);
  EXPECT_DOUBLE_EQ(s.tokens_per_verification(), 9.0 / 4.0);
  ASSERT_EQ(s.positions(), 4);
  EXPECT_EQ(s.proposed_at(0), 3);
  EXPECT_DOUBLE_EQ(s.acceptance_at(0), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.acceptance_at(1), 1.0 / 3.0);
  EXPECT_EQ(s.proposed_at(2), 2);
  EXPECT_DOUBLE_EQ(s.acceptance_at(3), 0.5);
  EXPECT_EQ(s.proposed_at(4), 0);
  EXPECT_EQ(s.summary(),
            "acceptance 0.500 (5/10 drafts), 2.25 tokens/verification, by position "
            "[0.67 0.33 0.50 0.50]");
  AcceptanceStats t;
  t.record(6, 6, 7);
  t.merge(s);
  EXPECT_EQ(t.proposed(), 16);
  EXPECT_EQ(t.positions(), 6);
  EXPECT_EQ(t.proposed_at(0), 4);
  EXPECT_DOUBLE_EQ(t.acceptance_at(5), 1.0);
  EXPECT_THROW(s.record(2, 3, 1), aisp::UsageError);
  EXPECT_THROW(s.record(2, 1, 3), aisp::UsageError);
  EXPECT_THROW(s.record(-1, 0, 1), aisp::UsageError);
}

// ---- the runner contract: sample_all in the FakeRunner ----

TEST(SpeculativeFakeRunner, SampleAllReturnsAnIdAfterEveryPosition) {
  FakeRunner runner(FakeRunnerOptions{8, 4, 64, 50, 64});
  StepBatch b;
  b.block_size = 4;
  b.sequences.push_back({1, {3, 4, 5, 6, 7}, 0, {0, 1}, true, false});
  b.sequences.push_back({2, {9, 8}, 0, {2}, false, false});  // prefill chunk, no id
  b.sequences.push_back({3, {11, 12, 13}, 0, {3}, false, true});
  const StepResult r = runner.step(b);
  ASSERT_EQ(r.sampled.size(), 4u);
  EXPECT_EQ(r.sampled[0], fake_next_token({3, 4, 5, 6, 7}, 50));
  EXPECT_EQ(r.sampled[1], fake_next_token({11}, 50));
  EXPECT_EQ(r.sampled[2], fake_next_token({11, 12}, 50));
  EXPECT_EQ(r.sampled[3], fake_next_token({11, 12, 13}, 50));
  // Verify two drafts after the cached prefix of sequence 1; a sample_all sequence ignores
  // `sample`.
  StepBatch v;
  v.block_size = 4;
  v.sequences.push_back({1, {20, 21, 22}, 5, {0, 1}, true, true});
  const StepResult rv = runner.step(v);
  ASSERT_EQ(rv.sampled.size(), 3u);
  EXPECT_EQ(rv.sampled[0], fake_next_token({3, 4, 5, 6, 7, 20}, 50));
  EXPECT_EQ(rv.sampled[2], fake_next_token({3, 4, 5, 6, 7, 20, 21, 22}, 50));
  // Drafts 21 and 22 rejected: a step starting past position 6 would read their stale slots; the
  // rolled-back one (start 6) overwrites them and sees the new history.
  StepBatch stale;
  stale.block_size = 4;
  stale.sequences.push_back({1, {30}, 8, {0, 1, 2}, true, false});
  EXPECT_EQ(runner.step(stale).sampled[0], fake_next_token({3, 4, 5, 6, 7, 20, 21, 22, 30}, 50));
  StepBatch fixed;
  fixed.block_size = 4;
  fixed.sequences.push_back({1, {30}, 6, {0, 1}, true, false});
  EXPECT_EQ(runner.step(fixed).sampled[0], fake_next_token({3, 4, 5, 6, 7, 20, 30}, 50));
}

// ---- generation with speculation through the FakeRunner ----

namespace {

// A draft model that disagrees with the FakeRunner now and then: a function of the id alone.
TokenId perturb(TokenId t, int vocab) { return t % 4 == 0 ? (t + 1) % vocab : t; }

// The FakeRunner with perturb() applied to every id: a draft runner for ModelDrafter.
class PerturbedRunner final : public ModelRunner {
 public:
  explicit PerturbedRunner(FakeRunnerOptions o) : m_inner(o) {}
  StepResult step(const StepBatch& batch) override {
    StepResult r = m_inner.step(batch);
    for (auto& t : r.sampled) t = perturb(t, vocab_size());
    return r;
  }
  int num_kv_blocks() const override { return m_inner.num_kv_blocks(); }
  int block_size() const override { return m_inner.block_size(); }
  int max_batched_tokens() const override { return m_inner.max_batched_tokens(); }
  int vocab_size() const override { return m_inner.vocab_size(); }
  int max_context() const override { return m_inner.max_context(); }

 private:
  FakeRunner m_inner;
};

// Proposes the target's own continuation (the FakeRunner's function), except that every
// `wrong_every`-th draft position (1-based; 0: never) gets a wrong token, or, with `perturbed`,
// PerturbedRunner's greedy continuation computed from scratch; counts releases.
class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(int vocab, int wrong_every, bool perturbed = false)
      : m_vocab(vocab), m_wrong_every(wrong_every), m_perturbed(perturbed) {}
  std::vector<std::vector<TokenId>> propose(std::span<const DraftRequest> requests) override {
    std::vector<std::vector<TokenId>> out;
    for (const auto& r : requests) {
      Ids h(r.tokens.begin(), r.tokens.end());
      Ids d;
      for (int i = 0; i < r.max_draft + m_extra; ++i) {
        TokenId t = fake_next_token(h, m_vocab);
        if (m_wrong_every > 0 && (i + 1) % m_wrong_every == 0) t = (t + 1) % m_vocab;
        if (m_perturbed) t = perturb(t, m_vocab);
        d.push_back(t);
        h.push_back(t);
      }
      out.push_back(d);
    }
    return out;
  }
  void release(SequenceId id) override { released.push_back(id); }
  std::vector<SequenceId> released;
  int m_extra = 0;  // proposes this many more than asked (the driver must cut them)

 private:
  int m_vocab;
  int m_wrong_every;
  bool m_perturbed;
};

std::vector<GenerationRequest> make_requests(int count, int vocab, std::uint32_t seed,
                                             int max_tokens) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> rs(static_cast<std::size_t>(count));
  for (auto& r : rs) {
    r.prompt.resize(1 + rng() % 40);
    for (auto& t : r.prompt) t = static_cast<TokenId>(rng() % vocab);
    r.max_tokens = 1 + static_cast<int>(rng() % max_tokens);
  }
  return rs;
}

void expect_plain_greedy(const SpeculativeRun& run, const std::vector<GenerationRequest>& rs,
                         int vocab, TokenId eos = -1, int max_context = 1 << 30) {
  ASSERT_EQ(run.outputs.size(), rs.size());
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const FakeGeneration want = fake_reference(rs[i], vocab, eos, max_context);
    EXPECT_EQ(run.outputs[i].tokens, want.tokens) << "request " << i;
    EXPECT_EQ(run.outputs[i].reason, want.reason) << "request " << i;
  }
}

}  // namespace

TEST(SpeculativeGenerate, WithoutADrafterIsPlainGreedyDecoding) {
  FakeRunner runner(FakeRunnerOptions{256, 4, 24, 100, 512});  // budget 24: prompts in chunks
  auto rs = make_requests(6, 100, 1, 30);
  rs[0].stop_token_ids = {fake_reference(rs[0], 100).tokens.front()};  // stops at once
  const auto run = generate_speculative(runner, nullptr, rs, {4, -1});
  expect_plain_greedy(run, rs, 100);
  EXPECT_EQ(run.stats.proposed(), 0);
  EXPECT_DOUBLE_EQ(run.stats.tokens_per_verification(), 1.0);
}

TEST(SpeculativeGenerate, PromptLookupGivesExactlyThePlainTokens) {
  // A vocabulary of 4: histories repeat, so n-grams recur and some drafts are right.
  FakeRunner runner(FakeRunnerOptions{512, 8, 64, 4, 1024});
  auto rs = make_requests(8, 4, 2, 120);
  rs[3].stop_token_ids = {2};
  PromptLookupDrafter drafter(PromptLookupOptions{1, 3, 4});
  const auto run = generate_speculative(runner, &drafter, rs, {4, -1});
  expect_plain_greedy(run, rs, 4);
  std::printf("prompt lookup on the FakeRunner (vocab 4, k 4): %s; %lld steps\n",
              run.stats.summary().c_str(), static_cast<long long>(run.steps));
  EXPECT_GT(run.stats.proposed(), 0);
  EXPECT_GT(run.stats.accepted(), 0);
  EXPECT_LT(run.stats.accepted(), run.stats.proposed());
}

TEST(SpeculativeGenerate, AnOracleDrafterIsAlwaysAcceptedAndRollsForwardByKPlusOne) {
  FakeRunner runner(FakeRunnerOptions{64, 4, 64, 1000, 512});
  GenerationRequest r;
  r.prompt = {5, 6, 7};
  r.max_tokens = 11;
  OracleDrafter drafter(1000, 0);
  drafter.m_extra = 2;  // over-long proposals are cut to max_draft
  const auto run = generate_speculative(runner, &drafter, {r}, {3, -1});
  expect_plain_greedy(run, {r}, 1000);
  // The prefill of 3 samples token 1 (position 3 has no K/V yet); then 4 tokens per verification,
  // and the last one, 2 tokens from max_tokens, asked for max_emit - 1 = 1 draft.
  EXPECT_EQ(run.start_positions, (std::vector<int>{3, 7, 11}));
  EXPECT_EQ(run.steps, 4);
  EXPECT_DOUBLE_EQ(run.stats.acceptance_rate(), 1.0);
  EXPECT_EQ(run.stats.proposed(), 3 + 3 + 1);
  EXPECT_EQ(drafter.released, std::vector<SequenceId>{0});
}

TEST(SpeculativeGenerate, AWrongDrafterCostsNothingButSpeed) {
  FakeRunner runner(FakeRunnerOptions{64, 4, 64, 1000, 512});
  GenerationRequest r;
  r.prompt = {5, 6, 7};
  r.max_tokens = 5;
  OracleDrafter drafter(1000, 1);  // every draft wrong
  const auto run = generate_speculative(runner, &drafter, {r}, {4, -1});
  expect_plain_greedy(run, {r}, 1000);
  EXPECT_EQ(run.start_positions, (std::vector<int>{3, 4, 5, 6}));  // one step back each time
  EXPECT_EQ(run.stats.accepted(), 0);
  EXPECT_DOUBLE_EQ(run.stats.tokens_per_verification(), 1.0);
}

TEST(SpeculativeGenerate, HalfRightDraftsAndEveryFinishRule) {
  FakeRunner runner(FakeRunnerOptions{512, 4, 40, 50, 60});  // context 60 cuts some requests
  auto rs = make_requests(12, 50, 3, 40);
  for (std::size_t i = 0; i < rs.size(); i += 3) {
    rs[i].stop_token_ids = {fake_reference(rs[i], 50).tokens.back()};
  }
  rs[1].ignore_eos = true;
  OracleDrafter drafter(50, 3);  // drafts 1, 2 right, 3 wrong, ...
  const auto run = generate_speculative(runner, &drafter, rs, {5, 7});
  expect_plain_greedy(run, rs, 50, 7, 60);
  EXPECT_GT(run.stats.acceptance_at(1), 0.9);
  EXPECT_EQ(run.stats.acceptance_at(2), 0.0);
  EXPECT_EQ(drafter.released.size(), rs.size());
}

TEST(SpeculativeGenerate, RefusesWhatItCannotRun) {
  FakeRunner runner(FakeRunnerOptions{2, 4, 64, 100, 64});  // 8 KV slots
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 20;
  EXPECT_THROW((void)generate_speculative(runner, nullptr, {r}, {}), aisp::UsageError);
  GenerationRequest empty;
  EXPECT_THROW((void)generate_speculative(runner, nullptr, {empty}, {}), aisp::UsageError);
  r.max_tokens = 0;
  EXPECT_THROW((void)generate_speculative(runner, nullptr, {r}, {}), aisp::UsageError);
  r.max_tokens = 1;
  EXPECT_THROW((void)generate_speculative(runner, nullptr, {r}, {-1, -1}), aisp::UsageError);
}

namespace {
class SilentDrafter final : public Drafter {
 public:
  std::vector<std::vector<TokenId>> propose(std::span<const DraftRequest>) override { return {}; }
};
}  // namespace

TEST(SpeculativeGenerate, ADrafterAnsweringTheWrongCountIsAnError) {
  FakeRunner runner(FakeRunnerOptions{16, 4, 64, 100, 64});
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 4;
  SilentDrafter drafter;
  EXPECT_THROW((void)generate_speculative(runner, &drafter, {r}, {}), aisp::DataError);
}

// ---- a draft model (ModelDrafter) ----

TEST(SpeculativeModelDrafter, ACopyOfTheTargetIsAlwaysAccepted) {
  FakeRunner target(FakeRunnerOptions{512, 4, 64, 50, 256});
  FakeRunner draft(
      FakeRunnerOptions{256, 8, 16, 50, 256});  // budget 16: prompts catch up in chunks
  ModelDrafter drafter(draft);
  const auto rs = make_requests(6, 50, 4, 40);
  const auto run = generate_speculative(target, &drafter, rs, {4, -1});
  expect_plain_greedy(run, rs, 50);
  EXPECT_GT(run.stats.proposed(), 0);
  EXPECT_DOUBLE_EQ(run.stats.acceptance_rate(), 1.0);
  EXPECT_GT(drafter.steps(), 0);
  EXPECT_EQ(drafter.blocks().num_used(), 0);  // every sequence released
}

// Rejections make the drafter roll its own cache back (to the common prefix, never past the last
// token); a wrong rollback reads rejected drafts' stale K/V or never-written slots, which changes
// its proposals or fails, so they must be exactly those of the same draft model computed from
// scratch.
TEST(SpeculativeModelDrafter, RollsBackRejectedDraftsLikeAStatelessDraftModel) {
  const auto rs = make_requests(6, 50, 5, 60);
  FakeRunner target(FakeRunnerOptions{512, 4, 64, 50, 256});
  PerturbedRunner draft(FakeRunnerOptions{256, 4, 24, 50, 256});
  ModelDrafter drafter(draft);
  const auto run = generate_speculative(target, &drafter, rs, {3, -1});
  expect_plain_greedy(run, rs, 50);
  FakeRunner target2(FakeRunnerOptions{512, 4, 64, 50, 256});
  OracleDrafter stateless(50, 0, true);
  const auto want = generate_speculative(target2, &stateless, rs, {3, -1});
  EXPECT_GT(want.stats.accepted(), 0);
  EXPECT_LT(want.stats.accepted(), want.stats.proposed());
  EXPECT_EQ(run.stats.summary(), want.stats.summary());
  EXPECT_EQ(run.start_positions, want.start_positions);
}

TEST(SpeculativeModelDrafter, ATooSmallDraftPoolOnlyShortensProposals) {
  FakeRunner target(FakeRunnerOptions{512, 4, 64, 50, 256});
  FakeRunner draft(FakeRunnerOptions{6, 4, 64, 50, 256});  // 24 slots for 4 sequences
  ModelDrafter drafter(draft);
  const auto rs = make_requests(4, 50, 6, 30);
  const auto run = generate_speculative(target, &drafter, rs, {4, -1});
  expect_plain_greedy(run, rs, 50);
  EXPECT_DOUBLE_EQ(run.stats.acceptance_rate(), 1.0);
  EXPECT_EQ(drafter.blocks().num_used(), 0);
  FakeRunner target2(FakeRunnerOptions{512, 4, 64, 50, 256});
  FakeRunner roomy(FakeRunnerOptions{256, 4, 64, 50, 256});
  ModelDrafter unconstrained(roomy);
  const auto full = generate_speculative(target2, &unconstrained, rs, {4, -1});
  EXPECT_GT(run.stats.proposed(), 0);
  EXPECT_LT(run.stats.proposed(), full.stats.proposed());
}
