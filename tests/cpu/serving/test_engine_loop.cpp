// EngineLoop over the FakeRunner: many random requests under every policy with a pool small enough
// to force preemption, some cancelled midway, must all produce exactly the reference tokens and
// leave every KV block free; drain, invalid submissions, queue_full, runner failures, shutdown,
// step statistics.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "core/base/error.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"

using namespace aisp::serving;

namespace {

struct Record {
  GenerationRequest request;
  std::atomic<RequestId> id{-1};
  int cancel_after = -1;        // the sink cancels after this many tokens (-1: never)
  std::vector<TokenId> tokens;  // written by the engine thread, read after drain()
  FinishReason reason = FinishReason::none;
  std::string error;
  int finals = 0;
};

TokenSink sink_for(Record& rec, Engine& engine) {
  return [&rec, &engine](const TokenEvent& e) {
    if (e.token >= 0) rec.tokens.push_back(e.token);
    if (e.finished) {
      ++rec.finals;
      rec.reason = e.reason;
      rec.error = e.error;
    } else if (static_cast<int>(rec.tokens.size()) == rec.cancel_after && rec.id.load() >= 0) {
      engine.cancel(rec.id.load());  // from inside the engine thread: applied between steps
    }
  };
}

// A runner whose step() blocks until released, to hold the engine inside a step.
class GateRunner final : public ModelRunner {
 public:
  explicit GateRunner(FakeRunner& inner) : m_inner(inner) {}
  StepResult step(const StepBatch& batch) override {
    std::unique_lock lock(m_mutex);
    ++m_entered;
    m_cv.notify_all();
    m_cv.wait(lock, [this] { return m_open; });
    return m_inner.step(batch);
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
  bool m_open = false;
};

GenerationRequest simple_request(int prompt_len, int max_tokens, int seed = 0) {
  GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back((seed * 37 + i * 11 + 1) % 100);
  r.max_tokens = max_tokens;
  return r;
}

struct RandomCase {
  const char* name;
  SchedulingPolicy policy;
  KvMode kv_mode;
  bool chunked_prefill;
  int requests;
};

class EngineLoopRandom : public ::testing::TestWithParam<RandomCase> {};

}  // namespace

TEST_P(EngineLoopRandom, EveryRequestGetsExactlyTheReferenceTokens) {
  const RandomCase& tc = GetParam();
  constexpr int kVocab = 200;
  constexpr TokenId kEos = 42;
  FakeRunnerOptions ro;
  ro.num_kv_blocks = 40;  // 320 slots: 16 running sequences of up to 160 tokens cannot all fit
  ro.block_size = 8;
  ro.max_batched_tokens = 64;
  ro.vocab_size = kVocab;
  ro.max_context = 256;
  FakeRunner runner(ro);
  SchedulerConfig c;
  c.policy = tc.policy;
  c.kv_mode = tc.kv_mode;
  c.chunked_prefill = tc.chunked_prefill;
  c.max_running = 16;
  c.max_waiting = 5000;
  c.block_size = 8;
  c.eos_token_id = kEos;
  auto engine = std::make_unique<EngineLoop>(runner, c);
  std::atomic<int> largest_step{0};
  std::atomic<bool> bad_composition{false};
  engine->set_step_observer([&](const StepStats& s) {
    largest_step = std::max(largest_step.load(), s.tokens);
    const auto& k = s.composition;
    if (k.prefill_tokens + k.decode_tokens + k.padding_tokens != s.tokens) bad_composition = true;
  });

  std::mt19937 rng(static_cast<unsigned>(tc.requests) * 7 + static_cast<unsigned>(tc.policy));
  const int max_prompt = tc.chunked_prefill ? 100 : ro.max_batched_tokens;
  std::vector<std::unique_ptr<Record>> records;
  for (int i = 0; i < tc.requests; ++i) {
    auto rec = std::make_unique<Record>();
    const int len = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_prompt));
    for (int t = 0; t < len; ++t)
      rec->request.prompt.push_back(static_cast<TokenId>(rng() % kVocab));
    rec->request.max_tokens = 1 + static_cast<int>(rng() % 60);
    rec->request.ignore_eos = rng() % 4 == 0;
    if (rng() % 3 == 0) rec->request.stop_token_ids = {static_cast<TokenId>(rng() % kVocab)};
    if (rng() % 10 == 0) rec->cancel_after = 1 + static_cast<int>(rng() % 5);
    records.push_back(std::move(rec));
  }
  for (auto& rec : records) {
    const SubmitResult r = engine->submit(rec->request, sink_for(*rec, *engine));
    ASSERT_EQ(r.status, SubmitStatus::accepted) << r.message;
    rec->id = r.id;
  }
  int cancelled_at_once = 0;
  for (std::size_t i = 0; i < records.size();
       i += 17) {  // some cancelled from outside, at any point
    engine->cancel(records[i]->id);
    ++cancelled_at_once;
  }
  engine->drain();

  int cancelled = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& rec = *records[i];
    const FakeGeneration ref = fake_reference(rec.request, kVocab, kEos, ro.max_context);
    ASSERT_EQ(rec.finals, 1) << "request " << i;
    ASSERT_NE(rec.reason, FinishReason::error) << "request " << i << ": " << rec.error;
    if (rec.reason == FinishReason::cancelled) {
      ++cancelled;
      ASSERT_LE(rec.tokens.size(), ref.tokens.size()) << "request " << i;
      ASSERT_TRUE(std::equal(rec.tokens.begin(), rec.tokens.end(), ref.tokens.begin()))
          << "request " << i;
    } else {
      ASSERT_EQ(rec.tokens, ref.tokens) << "request " << i;
      ASSERT_EQ(rec.reason, ref.reason) << "request " << i;
    }
  }
  EXPECT_GT(cancelled, cancelled_at_once / 2);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.requests_total, tc.requests);
  EXPECT_EQ(s.requests_finished, tc.requests);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_total, 40);
  if (tc.kv_mode == KvMode::paged) {
    EXPECT_GT(s.preemptions, 0) << "the pool was meant to force preemption";
  } else {
    EXPECT_EQ(s.preemptions, 0);
  }
  EXPECT_LE(largest_step.load(), ro.max_batched_tokens);
  EXPECT_FALSE(bad_composition.load());
  EXPECT_GT(s.steps, 0);
  EXPECT_EQ(s.steps, runner.steps());
}

INSTANTIATE_TEST_SUITE_P(
    EngineLoopPolicies, EngineLoopRandom,
    ::testing::Values(
        RandomCase{"continuous_paged", SchedulingPolicy::continuous, KvMode::paged, true, 1200},
        RandomCase{"continuous_paged_unchunked", SchedulingPolicy::continuous, KvMode::paged, false,
                   300},
        RandomCase{"continuous_reserved", SchedulingPolicy::continuous, KvMode::reserved, true,
                   200},
        RandomCase{"static_reserved", SchedulingPolicy::static_batch, KvMode::reserved, true, 200},
        RandomCase{"static_paged", SchedulingPolicy::static_batch, KvMode::paged, true, 300}),
    [](const ::testing::TestParamInfo<RandomCase>& info) { return std::string(info.param.name); });

TEST(EngineLoop, DrainWaitsForEveryRequestThenRefusesNewOnes) {
  FakeRunnerOptions ro;
  ro.step_sleep = std::chrono::microseconds(500);
  FakeRunner runner(ro);
  EngineLoop engine(runner, SchedulerConfig{});
  std::vector<std::unique_ptr<Record>> records;
  for (int i = 0; i < 20; ++i) {
    records.push_back(std::make_unique<Record>());
    records.back()->request = simple_request(5 + i, 20, i);
    const auto r = engine.submit(records.back()->request, sink_for(*records.back(), engine));
    ASSERT_EQ(r.status, SubmitStatus::accepted);
  }
  engine.drain();
  for (const auto& rec : records) {
    EXPECT_EQ(rec->finals, 1);
    EXPECT_EQ(rec->tokens, fake_reference(rec->request, ro.vocab_size).tokens);
  }
  const auto r = engine.submit(simple_request(4, 4), {});
  EXPECT_EQ(r.status, SubmitStatus::draining);
  EXPECT_FALSE(r.message.empty());
  EXPECT_EQ(engine.stats().requests_rejected, 1);
  engine.drain();  // nothing left: returns at once
}

TEST(EngineLoop, InvalidSubmissionsAreRefusedWithAReason) {
  FakeRunnerOptions ro;
  ro.max_context = 64;
  ro.vocab_size = 100;
  FakeRunner runner(ro);
  SchedulerConfig too_big;
  too_big.num_kv_blocks = ro.num_kv_blocks + 1;
  EXPECT_THROW((EngineLoop{runner, too_big}), aisp::UsageError);
  EngineLoop engine(runner, SchedulerConfig{});
  EXPECT_EQ(engine.info().max_context, 64);
  EXPECT_EQ(engine.info().vocab_size, 100);
  std::vector<GenerationRequest> bad(5);
  bad[0].max_tokens = 4;          // empty prompt
  bad[1] = simple_request(4, 0);  // max_tokens 0
  bad[2] = simple_request(4, -3);
  bad[3] = simple_request(60, 5);  // 65 > max_context
  bad[4] = simple_request(4, 4);
  bad[4].prompt[2] = 100;  // outside the vocabulary
  for (const auto& r : bad) {
    const SubmitResult res = engine.submit(r, {});
    EXPECT_EQ(res.status, SubmitStatus::invalid);
    EXPECT_FALSE(res.message.empty());
    EXPECT_EQ(res.id, -1);
  }
  EXPECT_EQ(engine.submit(simple_request(60, 4), {}).status, SubmitStatus::accepted);  // 64 exactly
  engine.drain();
  EXPECT_EQ(engine.stats().requests_total, 1);
  EXPECT_EQ(engine.stats().requests_rejected, 0);
}

TEST(EngineLoop, QueueFullBeyondMaxWaiting) {
  FakeRunner inner;
  GateRunner runner(inner);
  SchedulerConfig c;
  c.max_running = 1;
  c.max_waiting = 2;
  EngineLoop engine(runner, c);
  Record a, b, d, e;
  a.request = simple_request(4, 3);
  ASSERT_EQ(engine.submit(a.request, sink_for(a, engine)).status, SubmitStatus::accepted);
  runner.wait_entered();  // a is running (inside its first step): it no longer queues
  ASSERT_EQ(engine.submit(simple_request(4, 3, 1), sink_for(b, engine)).status,
            SubmitStatus::accepted);
  ASSERT_EQ(engine.submit(simple_request(4, 3, 2), sink_for(d, engine)).status,
            SubmitStatus::accepted);
  const SubmitResult full = engine.submit(simple_request(4, 3, 3), sink_for(e, engine));
  EXPECT_EQ(full.status, SubmitStatus::queue_full);
  EXPECT_FALSE(full.message.empty());
  EXPECT_EQ(engine.stats().requests_rejected, 1);
  EXPECT_EQ(engine.stats().waiting, 2);
  runner.open();
  engine.drain();
  EXPECT_EQ(a.tokens, fake_reference(a.request, inner.vocab_size()).tokens);
  EXPECT_EQ(b.finals + d.finals, 2);
  EXPECT_EQ(e.finals, 0);
}

TEST(EngineLoop, ARunnerExceptionFailsThatStepOnlyAndTheLoopGoesOn) {
  FakeRunner runner;
  runner.fail_at_step(0);
  EngineLoop engine(runner, SchedulerConfig{});
  std::promise<TokenEvent> first;
  auto r = engine.submit(simple_request(4, 5), [&first](const TokenEvent& e) {
    if (e.finished) first.set_value(e);
  });
  ASSERT_EQ(r.status, SubmitStatus::accepted);
  const TokenEvent e = first.get_future().get();
  EXPECT_EQ(e.reason, FinishReason::error);
  EXPECT_NE(e.error.find("injected"), std::string::npos);
  Record rec;
  rec.request = simple_request(6, 5, 1);
  ASSERT_EQ(engine.submit(rec.request, sink_for(rec, engine)).status, SubmitStatus::accepted);
  engine.drain();
  EXPECT_EQ(rec.tokens, fake_reference(rec.request, runner.vocab_size()).tokens);
  EXPECT_EQ(rec.reason, FinishReason::length);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(EngineLoop, DestructorCancelsWhatIsLeft) {
  FakeRunnerOptions ro;
  ro.step_sleep = std::chrono::milliseconds(1);
  FakeRunner runner(ro);
  Record rec;
  rec.request = simple_request(4, 1000);
  std::promise<void> started;
  std::atomic<bool> once{false};
  {
    EngineLoop engine(runner, SchedulerConfig{});
    auto inner = sink_for(rec, engine);
    ASSERT_EQ(engine
                  .submit(rec.request,
                          [inner, &started, &once](const TokenEvent& e) {
                            inner(e);
                            if (!once.exchange(true)) started.set_value();
                          })
                  .status,
              SubmitStatus::accepted);
    started.get_future().wait();
  }
  EXPECT_EQ(rec.finals, 1);
  EXPECT_EQ(rec.reason, FinishReason::cancelled);
  const auto ref = fake_reference(rec.request, ro.vocab_size).tokens;
  ASSERT_LT(rec.tokens.size(), ref.size());
  EXPECT_TRUE(std::equal(rec.tokens.begin(), rec.tokens.end(), ref.begin()));
}

TEST(EngineLoop, StepStatisticsAreRecorded) {
  FakeRunner runner;
  SchedulerConfig c;
  c.max_batched_tokens = 32;
  EngineLoop engine(runner, c);
  std::atomic<int> observed{0};
  engine.set_step_observer([&](const StepStats&) { ++observed; });
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(engine.submit(simple_request(40, 6, i), {}).status, SubmitStatus::accepted);
  engine.drain();
  const auto steps = engine.recent_steps();
  const EngineStats s = engine.stats();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(static_cast<std::int64_t>(steps.size()), s.steps);
  EXPECT_EQ(observed.load(), s.steps);
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].step, static_cast<std::int64_t>(i));
    EXPECT_LE(steps[i].tokens, 32);
    EXPECT_GE(steps[i].duration.count(), 0);
    EXPECT_FALSE(steps[i].failed);
    tokens += steps[i].tokens;
  }
  EXPECT_EQ(tokens, 4 * 40 + 4 * 5);  // every prompt token once, every decode but the last sampled
  EXPECT_EQ(s.prompt_tokens, 160);
  EXPECT_EQ(s.generated_tokens, 24);
}

TEST(EngineLoop, RunnerAndBusyTimeGrowOnlyWhileThereIsWork) {
  using namespace std::chrono_literals;
  using Clock = std::chrono::steady_clock;
  FakeRunnerOptions ro;
  ro.step_sleep = 2ms;
  FakeRunner runner(ro);
  EngineLoop engine(runner, SchedulerConfig{});
  const EngineStats fresh = engine.stats();
  EXPECT_TRUE(fresh.step_timing);
  EXPECT_EQ(fresh.runner_time.count(), 0);
  EXPECT_EQ(fresh.busy_time.count(), 0);

  // A batch of work, timed from outside: busy can be no longer than the wall time it took. (Not
  // drain(): the engine takes no work after it.)
  std::mutex mutex;
  std::condition_variable cv;
  int finished = 0;
  const auto run_batch = [&](int seed) {
    const auto start = Clock::now();
    for (int i = 0; i < 4; ++i) {
      const auto r = engine.submit(simple_request(8, 10, seed + i), [&](const TokenEvent& e) {
        if (!e.finished) return;
        std::lock_guard lock(mutex);
        ++finished;
        cv.notify_all();
      });
      EXPECT_EQ(r.status, SubmitStatus::accepted);
    }
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return finished == 4; });
    finished = 0;
    lock.unlock();
    // The last sink runs before its iteration's times are published, in the same lock section that
    // counts the request finished.
    const auto total = engine.stats().requests_total;
    while (engine.stats().requests_finished < total) std::this_thread::sleep_for(1ms);
    return Clock::now() - start;
  };
  std::this_thread::sleep_for(300ms);  // idle before any work: no busy time either
  const auto wall1 = run_batch(0);
  const EngineStats s1 = engine.stats();
  ASSERT_GT(s1.steps, 0);
  EXPECT_GE(s1.runner_time, s1.steps * 2ms);  // every step sleeps 2 ms inside the runner
  EXPECT_LE(s1.runner_time, s1.busy_time);
  EXPECT_LE(s1.busy_time, wall1);

  std::this_thread::sleep_for(300ms);  // idle: the engine thread sleeps on its condition variable
  const EngineStats idle = engine.stats();
  EXPECT_EQ(idle.steps, s1.steps);
  EXPECT_EQ(idle.runner_time, s1.runner_time);
  EXPECT_EQ(idle.busy_time, s1.busy_time);

  const auto wall2 = run_batch(10);
  const EngineStats s2 = engine.stats();
  EXPECT_GT(s2.steps, s1.steps);
  EXPECT_GE(s2.runner_time - s1.runner_time, (s2.steps - s1.steps) * 2ms);
  EXPECT_LE(s2.runner_time - s1.runner_time, s2.busy_time - s1.busy_time);
  // The 300 ms of sleep before the batch is not in it: the busy window opens at the wake-up.
  EXPECT_LE(s2.busy_time - s1.busy_time, wall2);
}

// ------------------------------------------------------------------------------------------------
// Prefix caching through the engine loop: chat workloads run with the cache on and off must give
// the same tokens (and the reference's); the tokens the runner computes show the hits.

namespace {

struct ChatWorkload {
  int conversations = 8;
  int turns = 3;
  int system_len = 0;      // a system prompt shared by every conversation (0: none)
  int user_len = 6;        // new tokens each turn
  int max_tokens = 8;
  int num_kv_blocks = 256;
  int max_running = 8;
};

struct ChatRun {
  std::vector<std::vector<std::vector<TokenId>>> outputs;  // [conversation][turn]
  std::vector<std::vector<std::vector<TokenId>>> prompts;
  std::int64_t computed_tokens = 0;
  EngineStats stats;
};

// Each conversation's turn t + 1 is submitted from the sink when turn t finishes, its prompt being
// turn t's prompt, its answer, and new user tokens: what a chat client sends.
ChatRun run_chats(const ChatWorkload& w, bool prefix_cache) {
  constexpr int kVocab = 500;
  FakeRunnerOptions ro;
  ro.num_kv_blocks = w.num_kv_blocks;
  ro.block_size = 4;
  ro.max_batched_tokens = 48;
  ro.vocab_size = kVocab;
  ro.max_context = 512;
  ro.allow_shared_blocks = prefix_cache;
  FakeRunner runner(ro);
  SchedulerConfig c;
  c.block_size = 4;
  c.max_running = w.max_running;
  c.prefix_cache = prefix_cache;
  auto engine = std::make_unique<EngineLoop>(runner, c);
  std::atomic<std::int64_t> computed{0};
  engine->set_step_observer([&](const StepStats& s) { computed += s.tokens; });

  ChatRun run;
  run.outputs.resize(static_cast<std::size_t>(w.conversations));
  run.prompts.resize(static_cast<std::size_t>(w.conversations));
  std::mutex mutex;
  std::condition_variable done_cv;
  int done = 0;
  bool failed = false;
  const auto user_tokens = [&](int conv, int turn) {
    std::vector<TokenId> t;
    for (int i = 0; i < w.user_len; ++i) t.push_back((conv * 97 + turn * 31 + i * 7 + 1) % kVocab);
    return t;
  };
  std::function<void(int, std::vector<TokenId>)> submit_turn = [&](int conv,
                                                                   std::vector<TokenId> prompt) {
    auto& prompts = run.prompts[static_cast<std::size_t>(conv)];
    prompts.push_back(prompt);
    run.outputs[static_cast<std::size_t>(conv)].emplace_back();
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = w.max_tokens;
    r.ignore_eos = true;
    const auto sink = [&, conv](const TokenEvent& e) {
      auto& out = run.outputs[static_cast<std::size_t>(conv)].back();
      if (e.token >= 0) out.push_back(e.token);
      if (!e.finished) return;
      const int turn = static_cast<int>(run.outputs[static_cast<std::size_t>(conv)].size());
      if (e.reason != FinishReason::length || turn == w.turns) {
        std::lock_guard lock(mutex);
        failed |= e.reason != FinishReason::length;
        ++done;
        done_cv.notify_all();
        return;
      }
      std::vector<TokenId> next = run.prompts[static_cast<std::size_t>(conv)].back();
      next.insert(next.end(), out.begin(), out.end());
      const auto user = user_tokens(conv, turn);
      next.insert(next.end(), user.begin(), user.end());
      submit_turn(conv, std::move(next));  // on the engine thread: submit() only queues
    };
    if (engine->submit(std::move(r), sink).status != SubmitStatus::accepted) {
      std::lock_guard lock(mutex);
      failed = true;
      ++done;
      done_cv.notify_all();
    }
  };
  std::vector<TokenId> system;
  for (int i = 0; i < w.system_len; ++i) system.push_back((i * 13 + 5) % kVocab);
  for (int conv = 0; conv < w.conversations; ++conv) {
    std::vector<TokenId> first = system;
    const auto user = user_tokens(conv, 0);
    first.insert(first.end(), user.begin(), user.end());
    submit_turn(conv, std::move(first));
  }
  {
    std::unique_lock lock(mutex);
    const bool finished = done_cv.wait_for(lock, std::chrono::seconds(120),
                                           [&] { return done == w.conversations; });
    EXPECT_TRUE(finished) << "chats did not finish";
    EXPECT_FALSE(failed);
  }
  engine->drain();
  run.stats = engine->stats();
  run.computed_tokens = computed.load();
  // Every turn is the reference's answer to its prompt.
  for (std::size_t conv = 0; conv < run.prompts.size(); ++conv) {
    for (std::size_t t = 0; t < run.prompts[conv].size(); ++t) {
      GenerationRequest r;
      r.prompt = run.prompts[conv][t];
      r.max_tokens = w.max_tokens;
      r.ignore_eos = true;
      EXPECT_EQ(run.outputs[conv][t], fake_reference(r, kVocab).tokens)
          << "conversation " << conv << " turn " << t;
    }
  }
  return run;
}

void expect_same_chats(const ChatRun& on, const ChatRun& off, const ChatWorkload& w) {
  EXPECT_EQ(on.outputs, off.outputs);
  EXPECT_EQ(on.prompts, off.prompts);
  for (const ChatRun* r : {&on, &off}) {
    EXPECT_EQ(r->stats.requests_finished, w.conversations * w.turns);
    EXPECT_EQ(r->stats.kv_blocks_used, 0);  // idle: cached blocks are evictable, counted free
    EXPECT_EQ(r->stats.running, 0);
    EXPECT_EQ(r->stats.waiting, 0);
  }
}

}  // namespace

TEST(EngineLoopPrefixCache, MultiTurnChatsReuseTheirHistory) {
  ChatWorkload w;
  w.conversations = 12;
  w.turns = 4;
  const ChatRun off = run_chats(w, false);
  const ChatRun on = run_chats(w, true);
  expect_same_chats(on, off, w);
  // Turns 2-4 find at least their previous turn's full blocks cached.
  EXPECT_LT(on.computed_tokens, off.computed_tokens * 2 / 3);
}

TEST(EngineLoopPrefixCache, ASharedSystemPromptIsComputedOnceOrSo) {
  ChatWorkload w;
  w.conversations = 40;
  w.turns = 1;
  w.system_len = 61;  // 15 full blocks + 1 token
  w.max_running = 4;
  const ChatRun off = run_chats(w, false);
  const ChatRun on = run_chats(w, true);
  expect_same_chats(on, off, w);
  // At most the first step's admissions (4) miss; the other 36 skip 60 tokens each.
  EXPECT_LE(on.computed_tokens, off.computed_tokens - 36 * 60);
}

TEST(EngineLoopPrefixCache, UnrelatedPromptsGainNothing) {
  ChatWorkload w;
  w.conversations = 30;
  w.turns = 1;
  const ChatRun off = run_chats(w, false);
  const ChatRun on = run_chats(w, true);
  expect_same_chats(on, off, w);
  EXPECT_EQ(on.computed_tokens, off.computed_tokens);  // the pool is large: no preemption either
  EXPECT_EQ(on.stats.preemptions, 0);
}

TEST(EngineLoopPrefixCache, EvictionAndPreemptionUnderMemoryPressureKeepTheTokens) {
  // 40 blocks of 4 for 8 running chats that grow to 8 + 4 * 6 + 4 * 8 = 64 tokens (16 blocks): the
  // pool cannot hold the cached histories, so blocks are evicted and sequences preempted.
  ChatWorkload w;
  w.conversations = 16;
  w.turns = 4;
  w.system_len = 8;
  w.num_kv_blocks = 40;
  const ChatRun off = run_chats(w, false);
  const ChatRun on = run_chats(w, true);
  expect_same_chats(on, off, w);
  EXPECT_GT(on.stats.preemptions, 0) << "the pool was meant to force preemption";
  EXPECT_LT(on.computed_tokens, off.computed_tokens);
}
