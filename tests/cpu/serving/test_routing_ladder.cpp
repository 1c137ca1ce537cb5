// ch17:routing's host-only core (serving/routed_cluster.hpp) with FakeRunner-backed EngineLoops behind
// real loopback servers and a Router: the multi-tenant workload (deterministic per seed, shaped by the
// spec), every policy serving every request with the fake model's reference tokens as the client
// received them, prefix locality keeping each tenant on one engine with more prefix-cache hits than
// round robin (exact counts, sequential load), the facts on scripted records (goodput counts exactly
// the requests within both SLOs), the load generator keeping the ids a stream carries, and the slot an
// HttpServer holds between launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/loadgen.hpp"
#include "serving/routed_cluster.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving {
namespace {

constexpr int k_vocab = 1000;
constexpr int k_block = 16;

// Small enough to run in well under a second per launch; system prompts of two full blocks.
TenantWorkloadSpec small_spec() {
  TenantWorkloadSpec s;
  s.requests = 24;
  s.tenants = 4;
  s.system_tokens = 2 * k_block;
  s.user_max = 12;
  s.output_max = 6;
  s.vocab = k_vocab;
  s.first_id = 3;
  return s;
}

// Two engines over FakeRunners, prefix caching on, fresh for each launch (empty caches), as the ladder
// builds its GPU engines.
struct FakeEngines {
  FakeEngines() {
    for (int i = 0; i < 2; ++i) {
      FakeRunnerOptions ro;
      ro.num_kv_blocks = 256;  // no eviction: the hit counts below are exact
      ro.block_size = k_block;
      ro.max_batched_tokens = 256;
      ro.vocab_size = k_vocab;
      ro.max_context = 512;
      ro.allow_shared_blocks = true;  // a prefix cache shares blocks between sequences
      runners.push_back(std::make_unique<FakeRunner>(ro));
      SchedulerConfig c;
      c.block_size = k_block;
      c.max_running = 8;
      c.prefix_cache = true;
      loops.push_back(std::make_unique<EngineLoop>(*runners.back(), c, "fake"));
      engines.push_back(loops.back().get());
    }
  }
  std::vector<std::unique_ptr<FakeRunner>> runners;
  std::vector<std::unique_ptr<EngineLoop>> loops;
  std::vector<Engine*> engines;
};

ModelInfo fake_model() {
  FakeEngines probe;
  return probe.loops.front()->info();
}

ClusterOptions cluster_options() {
  ClusterOptions o;
  o.engines = 2;
  o.model = fake_model();
  o.threads = 16;
  return o;
}

GenerationRequest as_request(const Prompt& p) {
  GenerationRequest r;
  r.prompt = p.ids;
  r.max_tokens = p.output_len;
  r.ignore_eos = true;
  return r;
}

std::int64_t total(const std::vector<std::int64_t>& v) {
  std::int64_t s = 0;
  for (const auto x : v) s += x;
  return s;
}

TEST(RoutingWorkload, DeterministicPerSeedWithTheShapeFixed) {
  const TenantWorkloadSpec spec = small_spec();
  const TenantWorkload a = make_tenant_workload(spec, 7);
  const TenantWorkload b = make_tenant_workload(spec, 7);
  const TenantWorkload c = make_tenant_workload(spec, 8);
  ASSERT_EQ(a.prompts.size(), 24u);
  ASSERT_EQ(a.system.size(), 4u);
  double distinct = spec.tenants * spec.system_tokens;
  std::set<int> tenants;
  for (std::size_t i = 0; i < a.prompts.size(); ++i) {
    EXPECT_EQ(a.prompts[i].ids, b.prompts[i].ids) << i;
    EXPECT_EQ(a.prompts[i].output_len, b.prompts[i].output_len) << i;
    // Another seed: other ids, the same shape (tenant, lengths): the same work for every seed.
    EXPECT_NE(a.prompts[i].ids, c.prompts[i].ids) << i;
    EXPECT_EQ(a.prompts[i].ids.size(), c.prompts[i].ids.size()) << i;
    EXPECT_EQ(a.prompts[i].output_len, c.prompts[i].output_len) << i;
    EXPECT_EQ(a.tenant[i], c.tenant[i]) << i;

    const auto& system = a.system[static_cast<std::size_t>(a.tenant[i])];
    ASSERT_GT(a.prompts[i].ids.size(), system.size());
    EXPECT_TRUE(std::equal(system.begin(), system.end(), a.prompts[i].ids.begin())) << i;
    const int user = static_cast<int>(a.prompts[i].ids.size() - system.size());
    EXPECT_GE(user, 1);
    EXPECT_LE(user, spec.user_max);
    EXPECT_GE(a.prompts[i].output_len, 1);
    EXPECT_LE(a.prompts[i].output_len, spec.output_max);
    for (const TokenId t : a.prompts[i].ids) {
      EXPECT_GE(t, spec.first_id);
      EXPECT_LT(t, spec.vocab);
    }
    distinct += user + a.prompts[i].output_len;
    tenants.insert(a.tenant[i]);
  }
  EXPECT_EQ(tenants.size(), 4u) << "24 requests over 4 tenants should reach every tenant";
  EXPECT_NE(a.system[0], a.system[1]);
  EXPECT_DOUBLE_EQ(tenant_workload_distinct_tokens(spec), distinct);
  EXPECT_EQ(tenant_workload_longest(spec), 32 + 12 + 6);
}

TEST(RoutingWorkload, BadSpecsAreUsageErrors) {
  auto s = small_spec();
  s.tenants = 0;
  EXPECT_THROW((void)make_tenant_workload(s, 1), UsageError);
  s = small_spec();
  s.requests = 0;
  EXPECT_THROW((void)make_tenant_workload(s, 1), UsageError);
  s = small_spec();
  s.vocab = s.first_id;
  EXPECT_THROW((void)make_tenant_workload(s, 1), UsageError);
  s = small_spec();
  s.system_tokens = 0;  // no shared prefix at all is a workload (nothing to route by)
  EXPECT_NO_THROW((void)make_tenant_workload(s, 1));
}

TEST(RoutingLoadgen, StreamParserKeepsTheIdsOfEveryChunk) {
  SseParser p;
  const std::string stream =
      "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":[5]}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":[7,9]}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n"  // a text server's chunk: no ids
      "data: [DONE]\n\n";
  p.feed(stream.data(), stream.size(), 0.5);
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.token_ids(), (std::vector<TokenId>{5, 7, 9}));
  EXPECT_EQ(p.tokens(), 4);
}

TEST(RoutingCluster, AnUnattachedSlotRefusesAndReportsNothing) {
  EngineSlot slot(fake_model());
  const SubmitResult r = slot.submit(GenerationRequest{}, [](const TokenEvent&) {});
  EXPECT_EQ(r.status, SubmitStatus::draining);
  EXPECT_EQ(slot.stats().requests_total, 0);
  EXPECT_TRUE(slot.submitted_prompts().empty());
  FakeEngines e;
  slot.attach(e.engines[0]);
  EXPECT_EQ(slot.info().name, "fake");
  slot.attach(nullptr);
  EXPECT_EQ(slot.submit(GenerationRequest{}, [](const TokenEvent&) {}).status, SubmitStatus::draining);
}

// Every policy, concurrent load: every request completes with exactly the fake model's tokens for its
// prompt as the client received them through the router, and both engines work.
TEST(RoutingCluster, EveryPolicyServesEveryRequestWithTheReferenceTokens) {
  RoutedCluster cluster(cluster_options());
  const TenantWorkload w = make_tenant_workload(small_spec(), 3);
  for (const std::string policy : {"round-robin", "least-tokens", "prefix"}) {
    SCOPED_TRACE(policy);
    const auto router = cluster.make_router(policy);
    FakeEngines e;
    const ClusterRun run = cluster.serve(*router, e.engines, w, {.rate = 0, .concurrency = 8, .seed = 1});
    ASSERT_EQ(check_complete(run, w), "");
    for (std::size_t i = 0; i < w.prompts.size(); ++i) {
      EXPECT_EQ(run.load.records[i].token_ids, fake_reference(as_request(w.prompts[i]), k_vocab).tokens) << i;
    }
    ASSERT_EQ(run.engines.size(), 2u);
    EXPECT_EQ(run.engines[0].requests + run.engines[1].requests, 24);
    EXPECT_GT(run.engines[0].requests, 0);
    EXPECT_GT(run.engines[1].requests, 0);
    // What the engines counted agrees with what the slots noted.
    EXPECT_EQ(run.engines[0].stats.requests_total, run.engines[0].requests);
    EXPECT_EQ(run.engines[1].stats.requests_total, run.engines[1].requests);
  }
}

// A gate that passes everything is no gate: a short answer is named.
TEST(RoutingCluster, CheckCompleteNamesAShortOrFailedRequest) {
  const TenantWorkload w = make_tenant_workload(small_spec(), 3);
  ClusterRun run;
  run.load.records.resize(w.prompts.size());
  for (std::size_t i = 0; i < w.prompts.size(); ++i) {
    auto& r = run.load.records[i];
    r.success = true;
    r.output_tokens = w.prompts[i].output_len;
    r.token_ids.assign(static_cast<std::size_t>(r.output_tokens), 5);
  }
  EXPECT_EQ(check_complete(run, w), "");
  run.load.records[4].token_ids.pop_back();
  EXPECT_NE(check_complete(run, w).find("request 4 got"), std::string::npos) << check_complete(run, w);
  run.load.records[4].token_ids.push_back(5);
  run.load.records[2].success = false;
  run.load.records[2].error = "HTTP 503: draining";
  EXPECT_NE(check_complete(run, w).find("request 2 failed: HTTP 503"), std::string::npos);
}

// One request at a time, so that every decision and every cache lookup is deterministic: round robin
// alternates engines, prefix locality keeps each tenant on the engine that served it first, and each
// engine computes a tenant's system prompt once (the first time it sees the tenant) and finds it
// cached afterwards (no eviction: the pools are large).
TEST(RoutingCluster, PrefixLocalityKeepsEachTenantOnOneEngineAndHitsMoreThanRoundRobin) {
  RoutedCluster cluster(cluster_options());
  const TenantWorkloadSpec spec = small_spec();
  const TenantWorkload w = make_tenant_workload(spec, 5);
  const LoadSpec sequential{.rate = 0, .concurrency = 1, .seed = 1};
  std::int64_t prompt_tokens = 0;
  for (const auto& p : w.prompts) prompt_tokens += static_cast<std::int64_t>(p.ids.size());

  ClusterRun rr, prefix;
  {
    const auto router = cluster.make_router("round-robin");
    FakeEngines e;
    rr = cluster.serve(*router, e.engines, w, sequential);
  }
  {
    const auto router = cluster.make_router("prefix");
    FakeEngines e;
    prefix = cluster.serve(*router, e.engines, w, sequential);
  }
  ASSERT_EQ(check_complete(rr, w), "");
  ASSERT_EQ(check_complete(prefix, w), "");

  // Round robin: request i on engine i % 2, whatever its tenant.
  std::vector<std::vector<int>> want(2, std::vector<int>(static_cast<std::size_t>(spec.tenants), 0));
  for (std::size_t i = 0; i < w.prompts.size(); ++i) ++want[i % 2][static_cast<std::size_t>(w.tenant[i])];
  EXPECT_EQ(rr.engines[0].tenant_requests, want[0]);
  EXPECT_EQ(rr.engines[1].tenant_requests, want[1]);
  int rr_pairs = 0;  // (engine, tenant) pairs: each computes that tenant's system prompt once
  for (const auto& e : want) {
    for (const int n : e) rr_pairs += n > 0 ? 1 : 0;
  }

  // Prefix locality: every tenant on exactly one engine, both engines used.
  for (int t = 0; t < spec.tenants; ++t) {
    const int on0 = prefix.engines[0].tenant_requests[static_cast<std::size_t>(t)];
    const int on1 = prefix.engines[1].tenant_requests[static_cast<std::size_t>(t)];
    EXPECT_TRUE(on0 == 0 || on1 == 0) << "tenant " << t << " split " << on0 << " / " << on1;
  }
  EXPECT_GT(prefix.engines[0].requests, 0);
  EXPECT_GT(prefix.engines[1].requests, 0);

  const RoutingSlo slo{.ttft_ms = 1e6, .tpot_ms = 1e6};
  const RoutingFacts frr = routing_facts(rr, slo);
  const RoutingFacts fpx = routing_facts(prefix, slo);
  EXPECT_DOUBLE_EQ(fpx.engines_per_tenant, 1.0);
  EXPECT_GT(frr.engines_per_tenant, 1.0);
  // Every prompt looked up once; cached: the system prompt of every request but a tenant's first on
  // each engine (2 full blocks; the user messages are new).
  EXPECT_EQ(total(frr.queried_tokens), prompt_tokens);
  EXPECT_EQ(total(fpx.queried_tokens), prompt_tokens);
  EXPECT_EQ(total(fpx.hit_tokens), static_cast<std::int64_t>(w.prompts.size() - spec.tenants) * spec.system_tokens);
  EXPECT_EQ(total(frr.hit_tokens), static_cast<std::int64_t>(w.prompts.size() - rr_pairs) * spec.system_tokens);
  EXPECT_GT(total(fpx.hit_tokens), total(frr.hit_tokens));
}

// Scripted records: goodput counts exactly the completed requests within both limits (a limit met
// exactly counts), TPOT as vLLM defines it; the per-engine facts come from the engines' shares.
TEST(RoutingFacts, GoodputCountsExactlyTheRequestsWithinBothSlos) {
  const auto record = [](double ttft_s, double e2e_s, int tokens) {
    RequestRecord r;
    r.success = true;
    r.ttft_s = ttft_s;
    r.e2e_s = e2e_s;
    r.output_tokens = tokens;
    return r;
  };
  ClusterRun run;
  run.load.duration_s = 2.0;
  // Times exact in binary, so that "at the limit" is exactly at it: limits 125 ms and 15.625 ms.
  run.load.records = {
      record(0.0625, 0.0625 + 8 * 0.0078125, 9),  // within both: TTFT 62.5 ms, TPOT 7.8125 ms
      record(0.25, 0.25 + 8 * 0.0078125, 9),      // TTFT over
      record(0.0625, 0.0625 + 8 * 0.03125, 9),    // TPOT over (31.25 ms)
      record(0.125, 0.125 + 8 * 0.015625, 9),     // both exactly at their limits: good
      record(0.09, 0.09, 1),                      // one token: TPOT 0 (vLLM), good
  };
  RequestRecord failed;
  failed.error = "Connection";
  run.load.records.push_back(failed);
  EngineShare a, b;
  a.requests = 4;
  a.tenant_requests = {3, 0, 1};
  a.stats.prefix_cache_queried_tokens = 400;
  a.stats.prefix_cache_hit_tokens = 100;
  a.stats.preemptions = 2;
  b.requests = 2;
  b.tenant_requests = {0, 0, 2};
  b.stats.prefix_cache_evictions = 7;
  run.engines = {a, b};

  const RoutingSlo slo{.ttft_ms = 125, .tpot_ms = 15.625};
  const RoutingFacts f = routing_facts(run, slo);
  EXPECT_EQ(f.summary.completed, 5);
  EXPECT_EQ(f.summary.failed, 1);
  EXPECT_EQ(f.summary.good, 3);
  ASSERT_TRUE(f.summary.goodput);
  EXPECT_DOUBLE_EQ(*f.summary.goodput, 1.5);
  EXPECT_EQ(f.requests, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(f.tenants_seen, 2);                  // tenant 1 sent nothing
  EXPECT_DOUBLE_EQ(f.engines_per_tenant, 1.5);  // tenant 0 on one engine, tenant 2 on both

  std::map<std::string, std::string> lines;
  for (const auto& [name, value] : routing_fact_lines(f, slo)) lines[name] = value;
  EXPECT_EQ(lines.at("goodput"), "1.5 req/s (3 of 6 within TTFT <= 125 ms and TPOT <= 15.625 ms)");
  EXPECT_EQ(lines.at("requests_per_engine"), "4 / 2");
  EXPECT_EQ(lines.at("hit_rate_per_engine"), "0.250 / 0.000");
  EXPECT_EQ(lines.at("evictions_per_engine"), "0 / 7");
  EXPECT_EQ(lines.at("preemptions_per_engine"), "2 / 0");
  EXPECT_EQ(lines.at("engines_per_tenant"), "1.50 (mean over 2 tenants)");
  EXPECT_TRUE(lines.count("ttft_ms_p50_p99"));
  EXPECT_TRUE(lines.count("tpot_ms_p50_p99"));
}

// An engine whose counters the test moves by hand: StallWatch sees only stats().
class ScriptedEngine final : public Engine {
 public:
  ModelInfo info() const override { return {}; }
  SubmitResult submit(GenerationRequest, TokenSink) override { return {}; }
  void cancel(RequestId) override {}
  EngineStats stats() const override {
    EngineStats s;
    s.steps = steps.load();
    s.requests_total = 3;
    s.running = 2;
    s.waiting = 1;
    return s;
  }
  void drain() override {}
  std::atomic<std::int64_t> steps{0};
};

TEST(RoutingStallWatch, ReportsEnginesThatStopMovingAndOnlyThem) {
  ScriptedEngine still, moving;
  std::mutex m;
  std::vector<std::string> lines;
  const auto collect = [&](const std::string& line) {
    const std::lock_guard lock(m);
    lines.push_back(line);
  };
  {
    // Both slots of a disaggregated run hold one engine: it is reported once.
    const StallWatch watch({&still, &still}, 0.05, collect);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_GE(watch.reports(), 2);  // again every period while nothing moves
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("routed cluster: nothing moved for"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("engine 0: accepted 3 finished 0 waiting 1 running 2 steps 0"), std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find("engine 1"), std::string::npos) << lines[0];

  lines.clear();
  {
    const StallWatch watch({&moving}, 0.2, collect);
    for (int i = 0; i < 60; ++i) {  // a step every 10 ms: never still for a period
      ++moving.steps;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(watch.reports(), 0);
  }
  // Only "still serving" lines (600 ms is 3 periods: a long load), never "nothing moved".
  for (const std::string& line : lines) EXPECT_EQ(line.find("nothing moved"), std::string::npos) << line;

  const StallWatch off({&still}, 0, collect);  // period 0: no thread, no report
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(off.reports(), 0);
}

// A FakeRunner whose step() stops returning from its `stop_at`-th call until release(): a GPU step whose
// work never completes, as ch15:disaggregated's colocated step showed on nvidia-h200-x2 (engine threads
// in cudaStreamSynchronize after a graph replay) with no StallWatch line in the log.
class StoppingRunner final : public ModelRunner {
 public:
  explicit StoppingRunner(int stop_at) : m_stop_at(stop_at) {}
  StepResult step(const StepBatch& batch) override {
    if (++m_calls >= m_stop_at) {
      std::unique_lock lock(m_mutex);
      m_stopped = true;
      m_wake.notify_all();
      m_wake.wait(lock, [this] { return m_released; });
    }
    return m_inner.step(batch);
  }
  int num_kv_blocks() const override { return m_inner.num_kv_blocks(); }
  int block_size() const override { return m_inner.block_size(); }
  int max_batched_tokens() const override { return m_inner.max_batched_tokens(); }
  int vocab_size() const override { return m_inner.vocab_size(); }
  int max_context() const override { return m_inner.max_context(); }
  void wait_until_stopped() {
    std::unique_lock lock(m_mutex);
    m_wake.wait(lock, [this] { return m_stopped; });
  }
  void release() {
    const std::lock_guard lock(m_mutex);
    m_released = true;
    m_wake.notify_all();
  }

 private:
  FakeRunner m_inner;
  int m_stop_at;
  std::atomic<int> m_calls{0};
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopped = false, m_released = false;
};

// The real engine loop, not a scripted one: its stats() must stay readable while its thread is inside a
// step that does not return, and the watch must then say that nothing moves.
TEST(RoutingStallWatch, ReportsAnEngineLoopStuckInsideAStep) {
  StoppingRunner runner(3);
  EngineLoop engine(runner, SchedulerConfig{});
  std::mutex m;
  std::vector<std::string> lines;
  {
    const StallWatch watch({&engine}, 0.1, [&](const std::string& line) {
      const std::lock_guard lock(m);
      lines.push_back(line);
    });
    GenerationRequest r;
    r.prompt = {1, 2, 3, 4};
    r.max_tokens = 8;
    r.ignore_eos = true;
    ASSERT_EQ(engine.submit(r, {}).status, SubmitStatus::accepted);
    runner.wait_until_stopped();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_GE(watch.reports(), 2) << "a step that never returns is a stall the watch reports";
    runner.release();
  }
  engine.drain();
  const std::lock_guard lock(m);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("nothing moved"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("running 1 steps 2"), std::string::npos) << lines[0];
}

TEST(RoutingStallWatch, ALoadThatKeepsMovingForTooLongSaysSoWithItsStepRate) {
  ScriptedEngine moving;
  std::mutex m;
  std::vector<std::string> lines;
  const auto collect = [&](const std::string& line) {
    const std::lock_guard lock(m);
    lines.push_back(line);
  };
  {
    // Period 20 ms: "still serving" after StallWatch::k_slow_periods of them (40 ms), then as often.
    const StallWatch watch({&moving}, 0.02, collect);
    for (int i = 0; i < 50; ++i) {  // a step every 5 ms for 250 ms: never still, but long
      ++moving.steps;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(watch.reports(), 0);
    EXPECT_GE(watch.slow_reports(), 1);
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("routed cluster: still serving after"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" steps in the last "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("engine 0: accepted"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace aisp::serving
