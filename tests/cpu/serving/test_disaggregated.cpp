// Prefill/decode disaggregation over two FakeRunners. The decode runner's slots start out poisoned
// and the FakeRunner's next token hashes the whole history read back through the KV cache, so a K/V
// copy that is skipped, misplaced or too short shows up as a DataError or a wrong token: the
// reference comparisons below are what proves the blocks moved (the SkippedMover tests show they
// fail without it). Covered: the scheduler's hand-off and prefilled admission; token streams equal
// to fake_reference() and to one colocated EngineLoop under roomy and tight pools (decode-side
// preemption included), with prefix caching on both sides and with speculative decoding on the
// decode side; every block free on both sides when idle; cancellation while waiting for
// prefill, while prefilling, while waiting for decode blocks, during the copy and while decoding;
// a failing mover; shutdown in every phase; refused configurations; the path of ch15:disaggregated's
// second step (behind loopback HTTP servers and the router) on fake runners.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "serving/disaggregated.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/http_server.hpp"
#include "serving/metrics.hpp"
#include "serving/routed_cluster.hpp"
#include "serving/scheduler.hpp"
#include "serving/speculative.hpp"

using namespace aisp::serving;

namespace {

constexpr int kVocab = 200;
constexpr TokenId kEos = 42;

// What one client saw. The sink runs on either engine's thread; the test reads under the mutex.
struct Record {
  GenerationRequest request;
  std::atomic<RequestId> id{-1};
  int cancel_after = -1;  // the sink cancels after this many tokens (-1: never)
  bool cancelled_from_outside = false;
  // The sink reached cancel_after before submit() had returned the id (the first token can come from
  // the engine's thread first): it could not cancel, and the request ran on. Such a stream depends on
  // timing, not on the engine, and is left out of the comparisons between engines.
  bool cancel_missed = false;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::none;
  std::string error;
  int finals = 0;
  int events_after_final = 0;

  void wait_tokens(std::size_t n) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return tokens.size() >= n || finals > 0; });
  }
  void wait_final() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return finals > 0; });
  }
};

TokenSink sink_for(Record& rec, Engine& engine) {
  return [&rec, &engine](const TokenEvent& e) {
    bool cancel = false;
    {
      std::lock_guard lock(rec.mutex);
      if (rec.finals > 0) ++rec.events_after_final;
      if (e.token >= 0) rec.tokens.push_back(e.token);
      if (e.finished) {
        ++rec.finals;
        rec.reason = e.reason;
        rec.error = e.error;
      } else {
        if (static_cast<int>(rec.tokens.size()) == rec.cancel_after) {
          cancel = rec.id.load() >= 0;
          rec.cancel_missed = !cancel;
        }
      }
    }
    rec.cv.notify_all();
    if (cancel) engine.cancel(rec.id.load());  // from the engine's thread: applied between steps
  };
}

// A runner whose steps can be held: closed, each step waits for a ticket (allow) or open().
class HoldRunner final : public ModelRunner {
 public:
  explicit HoldRunner(FakeRunner& inner) : m_inner(inner) {}
  StepResult step(const StepBatch& batch) override {
    {
      std::unique_lock lock(m_mutex);
      ++m_entered;
      m_cv.notify_all();
      m_cv.wait(lock, [this] { return m_open || m_tickets > 0; });
      if (!m_open) --m_tickets;
    }
    return m_inner.step(batch);
  }
  void close() {
    std::lock_guard lock(m_mutex);
    m_open = false;
  }
  void allow(int steps) {
    std::lock_guard lock(m_mutex);
    m_tickets += steps;
    m_cv.notify_all();
  }
  void open() {
    std::lock_guard lock(m_mutex);
    m_open = true;
    m_cv.notify_all();
  }
  // Returns once `n` steps have started (the last of them may be waiting for its ticket).
  void wait_entered(int n) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_entered >= n; });
  }
  [[nodiscard]] int num_kv_blocks() const override { return m_inner.num_kv_blocks(); }
  [[nodiscard]] int block_size() const override { return m_inner.block_size(); }
  [[nodiscard]] int max_batched_tokens() const override { return m_inner.max_batched_tokens(); }
  [[nodiscard]] int vocab_size() const override { return m_inner.vocab_size(); }
  [[nodiscard]] int max_context() const override { return m_inner.max_context(); }

 private:
  FakeRunner& m_inner;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  int m_entered = 0;
  int m_tickets = 0;
  bool m_open = true;
};

// A mover that waits, inside move(), until opened: holds a request in the middle of its transfer.
class HoldMover final : public KvBlockMover {
 public:
  explicit HoldMover(KvBlockMover& inner) : m_inner(inner) {}
  void move(std::span<const BlockId> src, std::span<const BlockId> dst) override {
    {
      std::unique_lock lock(m_mutex);
      ++m_entered;
      m_cv.notify_all();
      m_cv.wait(lock, [this] { return m_open; });
    }
    m_inner.move(src, dst);
  }
  void wait_entered() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_entered > 0; });
  }
  void open() {
    std::lock_guard lock(m_mutex);
    m_open = true;
    m_cv.notify_all();
  }

 private:
  KvBlockMover& m_inner;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  int m_entered = 0;
  bool m_open = false;
};

// Test doubles of a broken transfer.
class SkippedMover final : public KvBlockMover {
 public:
  void move(std::span<const BlockId>, std::span<const BlockId>) override {}
};

class ReversedMover final : public KvBlockMover {  // every block lands, in the wrong place
 public:
  ReversedMover(FakeRunner& source, FakeRunner& destination) : m_source(source), m_dest(destination) {}
  void move(std::span<const BlockId> src, std::span<const BlockId> dst) override {
    const std::vector<BlockId> reversed(dst.rbegin(), dst.rend());
    m_dest.copy_kv_blocks_from(m_source, src, reversed);
  }

 private:
  FakeRunner& m_source;
  FakeRunner& m_dest;
};

class ThrowingMover final : public KvBlockMover {
 public:
  void move(std::span<const BlockId>, std::span<const BlockId>) override {
    throw std::runtime_error("link down");
  }
};

FakeRunnerOptions runner_options(int blocks, int max_context = 160) {
  FakeRunnerOptions o;
  o.num_kv_blocks = blocks;
  o.block_size = 8;
  o.max_batched_tokens = 64;
  o.vocab_size = kVocab;
  o.max_context = max_context;
  return o;
}

SchedulerConfig engine_config(int max_running = 16) {
  SchedulerConfig c;
  c.max_running = max_running;
  c.max_waiting = 5000;
  c.block_size = 8;
  c.eos_token_id = kEos;
  return c;
}

GenerationRequest simple_request(int prompt_len, int max_tokens, int seed = 0) {
  GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back((seed * 37 + i * 11 + 1) % 100);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

std::vector<TokenId> reference_tokens(const GenerationRequest& r, int max_context = 160) {
  return fake_reference(r, kVocab, kEos, max_context).tokens;
}

// Mixed lengths and every way to end: eos, stop ids, max_tokens (1 included: the prefill engine
// finishes those), the context limit reached exactly, cancels from the sink (1: right at the
// hand-off; more: while decoding) and a few from outside at any moment.
// shared_prefix: every other prompt starts with the same 40 tokens (prefix caching's case).
std::vector<std::unique_ptr<Record>> make_workload(int n, unsigned seed, int max_context,
                                                   bool shared_prefix = false) {
  std::mt19937 rng(seed);
  std::vector<TokenId> preamble;
  for (int t = 0; t < 40; ++t) preamble.push_back(static_cast<TokenId>(rng() % kVocab));
  std::vector<std::unique_ptr<Record>> out;
  for (int i = 0; i < n; ++i) {
    auto rec = std::make_unique<Record>();
    if (shared_prefix && i % 2 == 0) rec->request.prompt = preamble;
    int len = 1 + static_cast<int>(rng() % 100);
    int max_tokens = 1 + static_cast<int>(rng() % 60);
    if (i % 7 == 3) max_tokens = 1;
    if (i % 11 == 5) {
      len = max_context - 1 - static_cast<int>(rng() % 3);  // ends at max_context in one or two
      max_tokens = max_context - len;                      // decodes, or in the prefill engine
      rec->request.prompt.clear();
    }
    len -= static_cast<int>(rec->request.prompt.size());
    if (len < 1) len = 1;
    for (int t = 0; t < len; ++t) rec->request.prompt.push_back(static_cast<TokenId>(rng() % kVocab));
    rec->request.max_tokens = max_tokens;
    rec->request.ignore_eos = rng() % 4 == 0;
    if (rng() % 3 == 0) rec->request.stop_token_ids = {static_cast<TokenId>(rng() % kVocab)};
    if (i % 13 == 6) rec->cancel_after = 1 + static_cast<int>(rng() % 4);
    rec->cancelled_from_outside = i % 29 == 17;
    out.push_back(std::move(rec));
  }
  return out;
}

void submit_all(Engine& engine, std::vector<std::unique_ptr<Record>>& records) {
  for (auto& rec : records) {
    const SubmitResult r = engine.submit(rec->request, sink_for(*rec, engine));
    ASSERT_EQ(r.status, SubmitStatus::accepted) << r.message;
    rec->id = r.id;
  }
  for (auto& rec : records) {
    if (rec->cancelled_from_outside) engine.cancel(rec->id);
  }
}

// The first way the records differ from the reference, or "". A cancelled request must have a
// prefix of its reference: exactly cancel_after tokens when its sink cancelled it, or at least that
// many when steps emit several tokens at once (speculative decoding: the cancel lands after the step).
std::string check_against_reference(std::vector<std::unique_ptr<Record>>& records, int max_context,
                                    bool several_per_step = false) {
  for (std::size_t i = 0; i < records.size(); ++i) {
    Record& rec = *records[i];
    std::lock_guard lock(rec.mutex);
    const FakeGeneration ref = fake_reference(rec.request, kVocab, kEos, max_context);
    const std::string who = "request " + std::to_string(i) + ": ";
    if (rec.finals != 1) return who + std::to_string(rec.finals) + " final events";
    if (rec.events_after_final != 0) return who + "events after the final one";
    if (rec.reason == FinishReason::cancelled) {
      const bool prefix = rec.tokens.size() <= ref.tokens.size() &&
                          std::equal(rec.tokens.begin(), rec.tokens.end(), ref.tokens.begin());
      if (!prefix) return who + "cancelled with tokens that are not a prefix of the reference";
      const int got = static_cast<int>(rec.tokens.size());
      if (!rec.cancelled_from_outside &&
          (several_per_step ? got < rec.cancel_after : got != rec.cancel_after)) {
        return who + "cancelled by its sink after " + std::to_string(rec.cancel_after) +
               " tokens, got " + std::to_string(rec.tokens.size());
      }
      if (!rec.cancelled_from_outside && rec.cancel_after < 0) return who + "cancelled by nobody";
      continue;
    }
    if (rec.reason == FinishReason::error) return who + "error: " + rec.error;
    if (rec.tokens != ref.tokens) return who + "tokens differ from the reference";
    if (rec.reason != ref.reason) return who + "finish reason differs from the reference";
  }
  return {};
}

int count_with_tokens(std::vector<std::unique_ptr<Record>>& records) {
  int n = 0;
  for (auto& rec : records) {
    std::lock_guard lock(rec->mutex);
    n += rec->tokens.empty() ? 0 : 1;
  }
  return n;
}

// --- scheduler level -----------------------------------------------------------------------------

struct SchedulerPair {
  SchedulerConfig prefill_config;
  SchedulerConfig decode_config;
  std::unique_ptr<Scheduler> prefill;
  std::unique_ptr<Scheduler> decode;
  FakeRunner prefill_runner;
  FakeRunner decode_runner;
  std::vector<SequenceEvent> events;

  SchedulerPair(int prefill_blocks, int decode_blocks)
      : prefill_runner(runner_options(prefill_blocks)), decode_runner(runner_options(decode_blocks)) {
    for (SchedulerConfig* c : {&prefill_config, &decode_config}) {
      *c = engine_config();
      c->max_batched_tokens = 64;
      c->max_context = 160;
      c->vocab_size = kVocab;
    }
    prefill_config.num_kv_blocks = prefill_blocks;
    prefill_config.hand_off_after_prefill = true;
    decode_config.num_kv_blocks = decode_blocks;
    prefill = std::make_unique<Scheduler>(prefill_config);
    decode = std::make_unique<Scheduler>(decode_config);
  }
  static void step(Scheduler& s, FakeRunner& runner, std::vector<SequenceEvent>& events) {
    const StepBatch b = s.schedule();
    if (!b.sequences.empty()) s.on_step_done(runner.step(b));
    for (auto& e : s.take_events()) events.push_back(std::move(e));
    ASSERT_EQ(s.blocks().check_invariants(), "");
  }
  std::vector<TokenId> tokens_of(SequenceId id) const {
    std::vector<TokenId> out;
    for (const auto& e : events)
      if (e.id == id && e.event.token >= 0) out.push_back(e.event.token);
    return out;
  }
};

}  // namespace

TEST(DisaggregatedScheduler, HandOffPinsTheBlocksUntilReleased) {
  SchedulerPair p(32, 32);
  const GenerationRequest r = simple_request(20, 10);
  ASSERT_EQ(p.prefill->add(1, r), AddStatus::accepted);
  std::vector<HandOff> handoffs;
  for (int i = 0; i < 10 && handoffs.empty(); ++i) {
    SchedulerPair::step(*p.prefill, p.prefill_runner, p.events);
    handoffs = p.prefill->take_handoffs();
  }
  ASSERT_EQ(handoffs.size(), 1u);
  const std::vector<TokenId> ref = reference_tokens(r);
  ASSERT_EQ(p.tokens_of(1), std::vector<TokenId>{ref[0]});  // the first token, from prefill
  const HandOff& h = handoffs[0];
  EXPECT_EQ(h.first_token, ref[0]);
  EXPECT_EQ(h.request.prompt, r.prompt);
  EXPECT_EQ(h.request.max_tokens, 10);
  EXPECT_EQ(h.blocks.size(), 3u);  // 20 positions in blocks of 8
  // Off the running set, never scheduled again, blocks held, deaf to cancel().
  EXPECT_FALSE(p.prefill->has_work());
  EXPECT_EQ(p.prefill->num_running(), 0);
  EXPECT_EQ(p.prefill->num_handed_off(), 1);
  EXPECT_EQ(p.prefill->blocks().num_used(), 3);
  EXPECT_FALSE(p.prefill->cancel(1));
  EXPECT_EQ(p.prefill->blocks().num_used(), 3);
  EXPECT_TRUE(p.prefill->schedule().sequences.empty());

  ASSERT_EQ(p.decode->add_prefilled(1, h.request, h.first_token), AddStatus::accepted);
  const std::vector<PrefilledAdmission> admitted = p.decode->admit_prefilled();
  ASSERT_EQ(admitted.size(), 1u);
  ASSERT_EQ(admitted[0].blocks.size(), 3u);
  EXPECT_EQ(p.decode->computed_of(1), 20);
  EXPECT_EQ(p.decode->blocks().block_table(1).size(), 3u);  // 21 positions: still 3 blocks
  p.decode_runner.copy_kv_blocks_from(p.prefill_runner, h.blocks, admitted[0].blocks);
  EXPECT_TRUE(p.prefill->release_handed_off(1));
  EXPECT_FALSE(p.prefill->release_handed_off(1));
  EXPECT_EQ(p.prefill->blocks().num_used(), 0);
  EXPECT_EQ(p.prefill->num_handed_off(), 0);

  for (int i = 0; i < 20 && p.decode->has_work(); ++i)
    SchedulerPair::step(*p.decode, p.decode_runner, p.events);
  EXPECT_FALSE(p.decode->has_work());
  EXPECT_EQ(p.tokens_of(1), ref);
  EXPECT_EQ(p.decode->blocks().num_used(), 0);
  EXPECT_EQ(p.decode->generated_tokens(), 9);  // the first one was the prefill engine's
}

TEST(DisaggregatedScheduler, ASkippedCopyIsCaughtByThePoisonedSlots) {
  SchedulerPair p(32, 32);
  const GenerationRequest r = simple_request(20, 10);
  ASSERT_EQ(p.decode->add_prefilled(1, r, reference_tokens(r)[0]), AddStatus::accepted);
  ASSERT_EQ(p.decode->admit_prefilled().size(), 1u);
  const StepBatch b = p.decode->schedule();
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(b.sequences[0].start_position, 20);  // a decode, not a prefill
  EXPECT_THROW((void)p.decode_runner.step(b), aisp::DataError);
}

TEST(DisaggregatedScheduler, AFullDecodePoolMakesThePrefilledSequencesWaitInOrder) {
  SchedulerPair p(32, 8);  // decode pool: 64 slots
  const GenerationRequest big = simple_request(40, 20, 1);  // 5 blocks, growing to 8
  const GenerationRequest next = simple_request(20, 4, 2);  // admitted at 21 positions: 3 blocks
  const GenerationRequest third = simple_request(4, 4, 3);  // 1 block: fits, but waits its turn
  // The prefill engine's side: both handed off in one step.
  ASSERT_EQ(p.prefill->add(2, next), AddStatus::accepted);
  ASSERT_EQ(p.prefill->add(3, third), AddStatus::accepted);
  SchedulerPair::step(*p.prefill, p.prefill_runner, p.events);
  const std::vector<HandOff> handoffs = p.prefill->take_handoffs();
  ASSERT_EQ(handoffs.size(), 2u);

  ASSERT_EQ(p.decode->add(1, big), AddStatus::accepted);
  SchedulerPair::step(*p.decode, p.decode_runner, p.events);  // big's prefill: 5 blocks
  SchedulerPair::step(*p.decode, p.decode_runner, p.events);  // its first decode: 6
  ASSERT_EQ(p.decode->blocks().num_used(), 6);
  for (const HandOff& h : handoffs)
    ASSERT_EQ(p.decode->add_prefilled(h.id, h.request, h.first_token), AddStatus::accepted);
  EXPECT_TRUE(p.decode->admit_prefilled().empty());  // 2 free, `next` needs 3, `third` is behind
  EXPECT_EQ(p.decode->num_prefilled_waiting(), 2);
  EXPECT_EQ(p.decode->num_running(), 1);

  std::vector<SequenceId> order;
  for (int i = 0; i < 80 && p.decode->has_work(); ++i) {
    for (const PrefilledAdmission& a : p.decode->admit_prefilled()) {
      order.push_back(a.id);
      const HandOff& h = handoffs[a.id == 2 ? 0 : 1];
      p.decode_runner.copy_kv_blocks_from(p.prefill_runner, h.blocks, a.blocks);
      EXPECT_TRUE(p.prefill->release_handed_off(a.id));
    }
    SchedulerPair::step(*p.decode, p.decode_runner, p.events);
  }
  EXPECT_FALSE(p.decode->has_work());
  EXPECT_EQ(order, (std::vector<SequenceId>{2, 3}));
  EXPECT_EQ(p.tokens_of(1), reference_tokens(big));
  EXPECT_EQ(p.tokens_of(2), reference_tokens(next));  // the first token from the prefill side
  EXPECT_EQ(p.tokens_of(3), reference_tokens(third));
  EXPECT_EQ(p.decode->blocks().num_used(), 0);
  EXPECT_EQ(p.prefill->blocks().num_used(), 0);
}

TEST(DisaggregatedScheduler, APreemptedPrefilledSequenceRecomputesFromItsTokens) {
  SchedulerPair p(32, 6);  // decode pool: 48 slots
  const GenerationRequest older = simple_request(20, 28, 4);  // 3 blocks, growing to 6
  const GenerationRequest r = simple_request(12, 20, 5);      // prefilled: admitted with 2
  ASSERT_EQ(p.prefill->add(7, r), AddStatus::accepted);
  SchedulerPair::step(*p.prefill, p.prefill_runner, p.events);
  const auto handoffs = p.prefill->take_handoffs();
  ASSERT_EQ(handoffs.size(), 1u);

  ASSERT_EQ(p.decode->add(1, older), AddStatus::accepted);
  SchedulerPair::step(*p.decode, p.decode_runner, p.events);
  ASSERT_EQ(p.decode->add_prefilled(7, handoffs[0].request, handoffs[0].first_token),
            AddStatus::accepted);
  const auto admitted = p.decode->admit_prefilled();
  ASSERT_EQ(admitted.size(), 1u);
  p.decode_runner.copy_kv_blocks_from(p.prefill_runner, handoffs[0].blocks, admitted[0].blocks);
  ASSERT_TRUE(p.prefill->release_handed_off(7));
  // `older` grows to 6 blocks: the newest holder, 7, is preempted, and later prefills its prompt
  // and generated tokens again on this runner, from its own tokens.
  for (int i = 0; i < 100 && p.decode->has_work(); ++i)
    SchedulerPair::step(*p.decode, p.decode_runner, p.events);
  EXPECT_FALSE(p.decode->has_work());
  EXPECT_GE(p.decode->preemptions(), 1);
  EXPECT_EQ(p.tokens_of(1), reference_tokens(older));
  EXPECT_EQ(p.tokens_of(7), reference_tokens(r));
  EXPECT_EQ(p.decode->blocks().num_used(), 0);
}

TEST(DisaggregatedScheduler, RefusesWhatCannotBeHandedOffOrDecoded) {
  SchedulerPair p(32, 32);
  SchedulerConfig static_prefill = p.prefill_config;
  static_prefill.policy = SchedulingPolicy::static_batch;
  EXPECT_THROW((Scheduler{static_prefill}), aisp::UsageError);
  SchedulerConfig reserved = p.prefill_config;
  reserved.kv_mode = KvMode::reserved;
  EXPECT_THROW((Scheduler{reserved}), aisp::UsageError);

  std::string why;
  GenerationRequest one = simple_request(10, 1);
  EXPECT_EQ(p.decode->add_prefilled(1, one, 5, &why), AddStatus::invalid);  // nothing to decode
  EXPECT_NE(why.find("nothing"), std::string::npos);
  GenerationRequest stop = simple_request(10, 5);
  stop.stop_token_ids = {5};
  EXPECT_EQ(p.decode->add_prefilled(2, stop, 5), AddStatus::invalid);
  GenerationRequest eos = simple_request(10, 5);
  eos.ignore_eos = false;
  EXPECT_EQ(p.decode->add_prefilled(3, eos, kEos), AddStatus::invalid);
  eos.ignore_eos = true;
  EXPECT_EQ(p.decode->add_prefilled(3, eos, kEos), AddStatus::accepted);  // eos ignored: decodes on
  EXPECT_EQ(p.decode->add_prefilled(4, simple_request(10, 5), kVocab), AddStatus::invalid);
  EXPECT_EQ(p.decode->add_prefilled(5, simple_request(159, 1), 3), AddStatus::invalid);
  EXPECT_TRUE(p.decode->cancel(3));  // a queued prefilled sequence cancels like a waiting one
  EXPECT_EQ(p.decode->num_prefilled_waiting(), 0);
  EXPECT_FALSE(p.decode->has_work());
}

// --- engine level --------------------------------------------------------------------------------

namespace {

struct PoolCase {
  const char* name;
  int prefill_blocks;
  int decode_blocks;
  int requests;
  bool decode_pressure;  // the decode pool is meant to force preemption there
  bool prefix_cache = false;  // on both sides, with prompts sharing a preamble
  bool speculative = false;   // drafts on the decode side (a FakeRunner draft model: always right)
};

class DisaggregatedRandom : public ::testing::TestWithParam<PoolCase> {};

}  // namespace

TEST_P(DisaggregatedRandom, StreamsEqualTheReferenceAndTheColocatedEngine) {
  const PoolCase& tc = GetParam();
  constexpr int kContext = 160;
  const auto options = [&](int blocks) {
    FakeRunnerOptions o = runner_options(blocks, kContext);
    o.allow_shared_blocks = tc.prefix_cache;
    return o;
  };
  const auto config = [&](Drafter* drafter) {
    SchedulerConfig c = engine_config();
    c.prefix_cache = tc.prefix_cache;
    c.drafter = drafter;
    return c;
  };
  FakeRunner prefill_runner(options(tc.prefill_blocks));
  FakeRunner decode_runner(options(tc.decode_blocks));
  RunnerKvMover mover(prefill_runner, decode_runner);
  FakeRunner draft_runner(runner_options(256, kContext));
  ModelDrafter drafter(draft_runner);
  auto records = make_workload(tc.requests, 11, kContext, tc.prefix_cache);
  {
    DisaggregatedEngine engine(prefill_runner, decode_runner, mover, config(nullptr),
                               config(tc.speculative ? &drafter : nullptr));
    EXPECT_EQ(engine.info().max_context, kContext);
    submit_all(engine, records);
    engine.drain();
    EXPECT_EQ(check_against_reference(records, kContext, tc.speculative), "");
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.requests_total, tc.requests);
    EXPECT_EQ(s.requests_finished, tc.requests);
    EXPECT_EQ(s.waiting, 0);
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.kv_blocks_total, tc.prefill_blocks + tc.decode_blocks);
    EXPECT_EQ(engine.prefill_engine().stats().kv_blocks_used, 0);
    EXPECT_EQ(engine.decode_engine().stats().kv_blocks_used, 0);
    // The prefill engine samples exactly one token per request that got any, and decodes none.
    EXPECT_EQ(engine.prefill_engine().stats().generated_tokens, count_with_tokens(records));
    EXPECT_GT(engine.handoffs(), tc.requests / 2);
    EXPECT_GT(decode_runner.blocks_received(), 0);
    EXPECT_EQ(s.steps, prefill_runner.steps() + decode_runner.steps());
    if (tc.decode_pressure) {
      EXPECT_GT(engine.decode_engine().stats().preemptions, 0);
    }
    if (tc.prefix_cache) {
      EXPECT_GT(s.prefix_cache_hit_tokens, 0);
    }
    if (tc.speculative) {
      EXPECT_GT(s.spec_accepted_tokens, 0);
    }
    const auto refused = engine.submit(simple_request(4, 4), {});
    EXPECT_EQ(refused.status, SubmitStatus::draining);
  }

  // One colocated engine on the same workload: the same streams (but for the cancels from outside,
  // whose moment differs, and with speculation, for the sinks' cancels).
  FakeRunner colocated_runner(options(tc.prefill_blocks + tc.decode_blocks));
  FakeRunner colocated_draft_runner(runner_options(256, kContext));
  ModelDrafter colocated_drafter(colocated_draft_runner);
  auto colocated = make_workload(tc.requests, 11, kContext, tc.prefix_cache);
  {
    EngineLoop engine(colocated_runner, config(tc.speculative ? &colocated_drafter : nullptr));
    submit_all(engine, colocated);
    engine.drain();
  }
  EXPECT_EQ(check_against_reference(colocated, kContext, tc.speculative), "");
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i]->cancelled_from_outside) continue;
    if (records[i]->cancel_missed || colocated[i]->cancel_missed) continue;  // timing, not the engine
    // Speculative: where a sink's cancel lands depends on how many tokens each step emitted.
    if (tc.speculative && records[i]->reason == FinishReason::cancelled) continue;
    EXPECT_EQ(records[i]->tokens, colocated[i]->tokens) << "request " << i;
    EXPECT_EQ(records[i]->reason, colocated[i]->reason) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pools, DisaggregatedRandom,
    ::testing::Values(PoolCase{"roomy", 256, 256, 300, false},
                      // 24 blocks of 8 for up to 16 sequences of up to 160 tokens
                      PoolCase{"decode_pressure", 256, 24, 300, true},
                      // and prefill blocks pinned by hand-offs waiting for decode blocks (which
                      // throttles the decode side: preemption there is likely, not certain)
                      PoolCase{"both_tight", 20, 24, 300, false},
                      PoolCase{"prefix_cache", 64, 64, 300, false, true, false},
                      PoolCase{"speculative_decode", 256, 64, 200, false, false, true}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

TEST(Disaggregated, ASkippedOrMisplacedCopyFailsTheComparison) {
  constexpr int kContext = 160;
  {
    FakeRunner prefill_runner(runner_options(64, kContext));
    FakeRunner decode_runner(runner_options(64, kContext));
    SkippedMover skipped;
    auto records = make_workload(40, 3, kContext);
    {
      DisaggregatedEngine engine(prefill_runner, decode_runner, skipped, engine_config(),
                                 engine_config());
      submit_all(engine, records);
      engine.drain();
      EXPECT_EQ(engine.stats().kv_blocks_used, 0);
    }
    EXPECT_NE(check_against_reference(records, kContext), "")
        << "a decode engine that never received the K/V matched the reference";
    int poisoned = 0;  // the fresh pool's first reads hit never-written slots
    for (const auto& rec : records)
      poisoned += rec->error.find("never written") != std::string::npos ? 1 : 0;
    EXPECT_GT(poisoned, 0);
  }
  {
    FakeRunner prefill_runner(runner_options(64, kContext));
    FakeRunner decode_runner(runner_options(64, kContext));
    ReversedMover reversed(prefill_runner, decode_runner);
    auto records = make_workload(40, 3, kContext);
    {
      DisaggregatedEngine engine(prefill_runner, decode_runner, reversed, engine_config(),
                                 engine_config());
      submit_all(engine, records);
      engine.drain();
    }
    EXPECT_NE(check_against_reference(records, kContext), "")
        << "blocks copied to the wrong places matched the reference";
  }
}

TEST(Disaggregated, AFailingMoverEndsThatRequestWithAnErrorAndFreesBothSides) {
  FakeRunner prefill_runner(runner_options(64));
  FakeRunner decode_runner(runner_options(64));
  ThrowingMover mover;
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(),
                             engine_config());
  Record a, b;
  a.request = simple_request(20, 5);
  b.request = simple_request(9, 1, 2);  // ends in the prefill engine: no transfer
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  b.id = engine.submit(b.request, sink_for(b, engine)).id;
  engine.wait_idle();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(a.reason, FinishReason::error);
  EXPECT_NE(a.error.find("link down"), std::string::npos) << a.error;
  EXPECT_EQ(a.tokens.size(), 1u);
  EXPECT_EQ(b.reason, FinishReason::length);
  EXPECT_EQ(b.tokens, reference_tokens(b.request));
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Disaggregated, CancelWhileWaitingForPrefill) {
  FakeRunner prefill_inner(runner_options(64));
  FakeRunner decode_runner(runner_options(64));
  HoldRunner prefill_runner(prefill_inner);
  RunnerKvMover mover(prefill_inner, decode_runner);
  SchedulerConfig pc = engine_config(1);  // one prefill at a time: the second request waits
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, pc, engine_config());
  prefill_runner.close();
  Record a, b;
  a.request = simple_request(12, 6);
  b.request = simple_request(12, 6, 1);
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  prefill_runner.wait_entered(1);  // a is inside its prefill step
  b.id = engine.submit(b.request, sink_for(b, engine)).id;
  engine.cancel(b.id);
  prefill_runner.open();
  engine.wait_idle();
  EXPECT_EQ(b.finals, 1);
  EXPECT_EQ(b.reason, FinishReason::cancelled);
  EXPECT_TRUE(b.tokens.empty());
  EXPECT_EQ(a.tokens, reference_tokens(a.request));
  EXPECT_EQ(engine.handoffs(), 1);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Disaggregated, CancelWhilePrefilling) {
  FakeRunnerOptions po = runner_options(64);
  po.max_batched_tokens = 8;  // a 40-token prompt prefills in 5 chunks
  FakeRunner prefill_inner(po);
  FakeRunner decode_runner(runner_options(64));
  HoldRunner prefill_runner(prefill_inner);
  RunnerKvMover mover(prefill_inner, decode_runner);
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(),
                             engine_config());
  prefill_runner.close();
  Record a;
  a.request = simple_request(40, 6);
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  prefill_runner.wait_entered(1);
  prefill_runner.allow(1);
  prefill_runner.wait_entered(2);  // inside the second chunk
  engine.cancel(a.id);
  prefill_runner.open();
  engine.wait_idle();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(a.reason, FinishReason::cancelled);
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_EQ(prefill_inner.steps(), 2);  // no chunk after the cancel
  EXPECT_EQ(engine.handoffs(), 0);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Disaggregated, CancelWhileWaitingForDecodeBlocks) {
  FakeRunnerOptions dopt = runner_options(4);
  dopt.block_size = 4;
  FakeRunnerOptions popt = runner_options(64);
  popt.block_size = 4;
  FakeRunner prefill4(popt);
  FakeRunner decode_inner(dopt);
  HoldRunner decode_runner(decode_inner);
  RunnerKvMover mover(prefill4, decode_inner);
  SchedulerConfig c = engine_config();
  c.block_size = 4;
  DisaggregatedEngine engine(prefill4, decode_runner, mover, c, c);
  decode_runner.close();
  Record a, b;
  a.request = simple_request(6, 10);  // admitted with 2 of the decode pool's 4 blocks, grows to 4
  b.request = simple_request(9, 4, 1);  // needs 3: waits while a holds 2 or more
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  engine.wait_for_handoffs(1);
  decode_runner.wait_entered(1);  // a's first decode step
  b.id = engine.submit(b.request, sink_for(b, engine)).id;
  engine.wait_for_handoffs(2);    // b is queued on the decode engine
  decode_runner.allow(1);
  decode_runner.wait_entered(2);  // the decode engine took b in, found no room, and stepped a
  EXPECT_EQ(engine.decode_engine().stats().waiting, 1);
  EXPECT_EQ(engine.prefill_engine().stats().kv_blocks_used, 3);  // b's prompt, pinned
  engine.cancel(b.id);
  decode_runner.open();
  engine.wait_idle();
  EXPECT_EQ(b.finals, 1);
  EXPECT_EQ(b.reason, FinishReason::cancelled);
  EXPECT_EQ(b.tokens, std::vector<TokenId>{reference_tokens(b.request)[0]});
  EXPECT_EQ(a.tokens, reference_tokens(a.request));
  EXPECT_EQ(decode_inner.blocks_received(), 2);  // a's prompt only: b's never moved
  EXPECT_EQ(engine.prefill_engine().stats().kv_blocks_used, 0);
  EXPECT_EQ(engine.decode_engine().stats().kv_blocks_used, 0);
}

TEST(Disaggregated, CancelDuringTheCopy) {
  FakeRunner prefill_runner(runner_options(64));
  FakeRunner decode_runner(runner_options(64));
  RunnerKvMover inner(prefill_runner, decode_runner);
  HoldMover mover(inner);
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(),
                             engine_config());
  Record a;
  a.request = simple_request(20, 30);
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  mover.wait_entered();
  engine.cancel(a.id);
  EXPECT_EQ(engine.prefill_engine().stats().kv_blocks_used, 3);  // still pinned: being read
  mover.open();
  engine.wait_idle();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(a.reason, FinishReason::cancelled);
  const auto ref = reference_tokens(a.request);
  // The copy completes, then the cancel lands before the next step or the one after.
  ASSERT_GE(a.tokens.size(), 1u);
  ASSERT_LE(a.tokens.size(), 2u);
  EXPECT_TRUE(std::equal(a.tokens.begin(), a.tokens.end(), ref.begin()));
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Disaggregated, CancelWhileDecoding) {
  FakeRunner prefill_runner(runner_options(64));
  FakeRunner decode_runner(runner_options(64));
  RunnerKvMover mover(prefill_runner, decode_runner);
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(),
                             engine_config());
  Record a;
  a.request = simple_request(20, 30);
  a.cancel_after = 4;  // from the decode engine's thread
  a.id = engine.submit(a.request, sink_for(a, engine)).id;
  a.wait_final();
  engine.wait_idle();
  EXPECT_EQ(a.reason, FinishReason::cancelled);
  const auto ref = reference_tokens(a.request);
  EXPECT_EQ(a.tokens, std::vector<TokenId>(ref.begin(), ref.begin() + 4));
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Disaggregated, ShutdownCancelsEveryPhaseOnce) {
  FakeRunnerOptions po = runner_options(64);
  po.max_batched_tokens = 8;
  FakeRunner prefill_inner(po);
  FakeRunner decode_inner(runner_options(64));
  HoldRunner prefill_runner(prefill_inner);
  HoldRunner decode_runner(decode_inner);
  RunnerKvMover mover(prefill_inner, decode_inner);
  std::vector<std::unique_ptr<Record>> records;
  {
    DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(2),
                               engine_config());
    decode_runner.close();
    auto add = [&](int prompt, int max_tokens, int seed) {
      records.push_back(std::make_unique<Record>());
      records.back()->request = simple_request(prompt, max_tokens, seed);
      records.back()->id =
          engine.submit(records.back()->request, sink_for(*records.back(), engine)).id;
    };
    add(6, 50, 0);                   // handed off, decoding (held in the decode runner)
    engine.wait_for_handoffs(1);
    decode_runner.wait_entered(1);
    add(5, 50, 1);                   // handed off, queued on the held decode engine
    engine.wait_for_handoffs(2);
    prefill_runner.close();
    add(60, 5, 2);                   // prefilling (held in the prefill runner)
    prefill_runner.wait_entered(3);  // after one step for each of the two above
    add(7, 5, 3);                    // waiting for prefill
    add(8, 5, 4);
    // The held steps must be let go for the engines to see their stop, so some of these may move
    // on a little first; whatever phase each is in, it gets exactly one final event.
    prefill_runner.open();
    decode_runner.open();
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& rec = *records[i];
    EXPECT_EQ(rec.finals, 1) << "request " << i;
    EXPECT_EQ(rec.events_after_final, 0) << "request " << i;
    const auto ref = reference_tokens(rec.request);
    EXPECT_TRUE(std::equal(rec.tokens.begin(), rec.tokens.end(), ref.begin())) << "request " << i;
  }
}

TEST(Disaggregated, RefusesMismatchedRunnersAndSizes) {
  FakeRunner prefill_runner(runner_options(64));
  FakeRunnerOptions other = runner_options(64);
  other.block_size = 16;
  FakeRunner wrong_blocks(other);
  RunnerKvMover mover(prefill_runner, wrong_blocks);
  SchedulerConfig c16 = engine_config();
  c16.block_size = 16;
  EXPECT_THROW((DisaggregatedEngine{prefill_runner, wrong_blocks, mover, engine_config(), c16}),
               aisp::UsageError);
  FakeRunner decode_runner(runner_options(64, 100));  // a shorter context on the decode side
  RunnerKvMover mover2(prefill_runner, decode_runner);
  SchedulerConfig static_decode = engine_config();
  static_decode.policy = SchedulingPolicy::static_batch;
  EXPECT_THROW(
      (DisaggregatedEngine{prefill_runner, decode_runner, mover2, engine_config(), static_decode}),
      aisp::UsageError);
  SchedulerConfig other_eos = engine_config();
  other_eos.eos_token_id = 7;
  EXPECT_THROW(
      (DisaggregatedEngine{prefill_runner, decode_runner, mover2, engine_config(), other_eos}),
      aisp::UsageError);
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover2, engine_config(),
                             engine_config());
  EXPECT_EQ(engine.info().max_context, 100);
  const SubmitResult r = engine.submit(simple_request(90, 20), {});
  EXPECT_EQ(r.status, SubmitStatus::invalid);
  EXPECT_NE(r.message.find("context"), std::string::npos) << r.message;
  EXPECT_EQ(engine.stats().requests_total, 0);
  // A runner without the copy refuses it in one line.
  FakeRunner fake(runner_options(8));
  HoldRunner wrapper(fake);
  const std::vector<BlockId> blocks = {0};
  EXPECT_THROW(wrapper.copy_kv_blocks_from(fake, blocks, blocks), aisp::UsageError);
  EXPECT_THROW(fake.copy_kv_blocks_from(wrapper, blocks, blocks), aisp::UsageError);
}

// The path of ch15:disaggregated's second step, on fake runners: loopback HTTP servers both holding the
// one disaggregated engine, a round-robin router in front, the load generator's client streaming every
// request (serving/routed_cluster.hpp). The ids the client received are the reference's, and every
// request whose first token did not end it was handed off.
TEST(Disaggregated, BehindTheRouterAsTheLadderServesIt) {
  FakeRunnerOptions o = runner_options(128, 256);
  o.block_size = 16;
  FakeRunner prefill_runner(o);
  FakeRunner decode_runner(o);
  RunnerKvMover mover(prefill_runner, decode_runner);
  SchedulerConfig c = engine_config(8);
  c.block_size = 16;
  c.eos_token_id = -1;  // the workload ignores eos anyway; the reference below uses none
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, c, c, "fake");
  ClusterOptions co;
  co.engines = 2;
  co.model = engine.info();
  co.threads = 16;
  RoutedCluster cluster(co);
  TenantWorkloadSpec spec;
  spec.requests = 24;
  spec.tenants = 1;
  spec.system_tokens = 0;
  spec.user_max = 40;
  spec.output_max = 8;
  spec.vocab = kVocab;
  spec.first_id = 3;
  const TenantWorkload w = make_tenant_workload(spec, 5);
  const auto router = cluster.make_router("round-robin");
  const std::vector<Engine*> engines = {&engine, &engine};
  const ClusterRun run = cluster.serve(*router, engines, w, {.rate = 0, .concurrency = 8, .seed = 1});
  ASSERT_EQ(check_complete(run, w), "");
  std::int64_t multi_token = 0;
  for (std::size_t i = 0; i < w.prompts.size(); ++i) {
    GenerationRequest r;
    r.prompt = w.prompts[i].ids;
    r.max_tokens = w.prompts[i].output_len;
    r.ignore_eos = true;
    EXPECT_EQ(run.load.records[i].token_ids, fake_reference(r, kVocab).tokens) << "request " << i;
    multi_token += w.prompts[i].output_len > 1 ? 1 : 0;
  }
  engine.wait_idle();
  EXPECT_GT(multi_token, 0);
  EXPECT_EQ(engine.handoffs(), multi_token);
  EXPECT_EQ(engine.stats().requests_finished, spec.requests);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

// What `aisp serve --disaggregate` exports: the server's /metrics reads only Engine::stats(), and the
// disaggregated engine's adds both sides (both pools, both engines' steps), so nothing is lost in
// the exposition: the pools differ in size, and the step count must be the two engines' sum.
TEST(Disaggregated, MetricsAddBothSides) {
  FakeRunner prefill_runner(runner_options(64));
  FakeRunner decode_runner(runner_options(96));
  RunnerKvMover mover(prefill_runner, decode_runner);
  DisaggregatedEngine engine(prefill_runner, decode_runner, mover, engine_config(), engine_config());
  const HttpServer server(engine, ServerOptions{});  // not started: only its exposition is read
  std::vector<std::unique_ptr<Record>> records;
  int tokens = 0;
  for (int i = 0; i < 6; ++i) {
    records.push_back(std::make_unique<Record>());
    records.back()->request = simple_request(10 + 7 * i, 5 + i, i);
    tokens += 5 + i;
  }
  submit_all(engine, records);
  engine.wait_idle();
  for (const auto& rec : records) {
    EXPECT_EQ(rec->tokens, reference_tokens(rec->request));
  }
  const auto m = parse_prometheus_text(server.metrics_text());
  const std::int64_t prefill_steps = engine.prefill_engine().stats().steps;
  const std::int64_t decode_steps = engine.decode_engine().stats().steps;
  EXPECT_GT(prefill_steps, 0);
  EXPECT_GT(decode_steps, 0);
  EXPECT_EQ(m.value("aisp_engine_steps_total"), static_cast<double>(prefill_steps + decode_steps));
  EXPECT_EQ(m.value("aisp_kv_blocks_total"), 64 + 96);
  EXPECT_EQ(m.value("aisp_kv_blocks_used"), 0);
  EXPECT_EQ(m.value("aisp_generation_tokens_total"), tokens);
  EXPECT_GT(m.value("aisp_engine_runner_seconds_total"), 0);
}

// `aisp serve --disaggregate PREFILL,DECODE`: two different device indices, nothing else; the
// refusal names the option and the value (the CLI prints it as its one line).
TEST(DisaggregatedDevices, ParsesTwoDifferentIndices) {
  const DevicePair p = parse_device_pair("0,1");
  EXPECT_EQ(p.prefill, 0);
  EXPECT_EQ(p.decode, 1);
  const DevicePair q = parse_device_pair("7,2");
  EXPECT_EQ(q.prefill, 7);
  EXPECT_EQ(q.decode, 2);
  for (const char* bad : {"", "0", "1,", ",1", "0,0", "3,3", "0,1,2", "-1,0", "0,-1", "+0,1", " 0,1",
                          "0, 1", "0,1 ", "a,1", "0x1,2", "0;1", "99999999999,0"}) {
    try {
      (void)parse_device_pair(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const aisp::UsageError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(std::string("--disaggregate '") + bad + "'", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  try {
    (void)parse_device_pair("1,1");
    ADD_FAILURE() << "1,1 was accepted";
  } catch (const aisp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("two different devices"), std::string::npos) << e.what();
  }
}
