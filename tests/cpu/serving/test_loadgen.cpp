// serving/loadgen: statistics on synthetic timings with known answers (vLLM's definitions), the
// arrival process, workloads, the SSE parser, and a short run against the fake engine behind the
// real server.
#include <arpa/inet.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/http_server.hpp"
#include "serving/loadgen.hpp"
#include "serving/testing_engine.hpp"

namespace aisp::serving {
namespace {

using namespace std::chrono_literals;

TEST(ServingLoadgen, PercentilesInterpolateLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) == [2.5, 3.7, 3.97]
  const std::vector<double> v{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  const auto d = distribution({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(d.mean, 5);
  EXPECT_DOUBLE_EQ(d.std, 2); // population standard deviation, as numpy.std
  EXPECT_DOUBLE_EQ(d.max, 9);
  EXPECT_EQ(d.count, 8u);
}

std::vector<RequestRecord> synthetic_records() {
  RequestRecord a; // 11 tokens: first at 100 ms, then every 100 ms: e2e 1.1 s, TPOT 100 ms
  a.success = true;
  a.prompt_tokens = 30;
  a.output_tokens = 11;
  a.ttft_s = 0.1;
  a.e2e_s = 1.1;
  a.itl_s.assign(10, 0.1);
  RequestRecord b; // one token: no TPOT sample, TPOT 0 for goodput
  b.success = true;
  b.prompt_tokens = 10;
  b.output_tokens = 1;
  b.ttft_s = 0.2;
  b.e2e_s = 0.2;
  RequestRecord c;
  c.error = "HTTP 429: full";
  c.prompt_tokens = 99;
  return {a, b, c};
}

TEST(ServingLoadgen, SummaryFollowsVllmDefinitions) {
  const auto s = summarize(synthetic_records(), 2.0, Slo{});
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.errors.at("HTTP 429: full"), 1);
  EXPECT_EQ(s.input_tokens, 40); // failed requests' prompts do not count
  EXPECT_EQ(s.output_tokens, 12);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 6.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 26.0);
  EXPECT_EQ(s.tpot_ms.count, 1u); // only the request with more than one token
  EXPECT_NEAR(s.tpot_ms.mean, 100.0, 1e-9);
  EXPECT_EQ(s.itl_ms.count, 10u);
  EXPECT_NEAR(s.itl_ms.p99, 100.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms.mean, 150.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms.p50, 150.0, 1e-9);
  EXPECT_NEAR(s.e2el_ms.max, 1100.0, 1e-9);
  EXPECT_FALSE(s.goodput);
  EXPECT_EQ(failure_line(s), "1 failed: 1 x HTTP 429: full");
  EXPECT_NE(summary_table(s, "t").find("Mean TPOT (ms):"), std::string::npos);
  EXPECT_EQ(summary_json(s)["tpot_ms"]["count"], 1);
}

TEST(ServingLoadgen, GoodputCountsRequestsMeetingEverySlo) {
  const auto records = synthetic_records();
  auto s = summarize(records, 2.0, Slo{.ttft_ms = 150}); // a meets it, b (200 ms) does not
  EXPECT_EQ(s.good, 1);
  EXPECT_DOUBLE_EQ(*s.goodput, 0.5);
  s = summarize(records, 2.0, Slo{.tpot_ms = 50}); // a's 100 ms fails; b's TPOT counts as 0
  EXPECT_EQ(s.good, 1);
  s = summarize(records, 2.0,
                Slo{.ttft_ms = 250, .tpot_ms = 100, .e2el_ms = 1100}); // on the bounds: good
  EXPECT_EQ(s.good, 2);
  EXPECT_DOUBLE_EQ(*s.goodput, 1.0);
  s = summarize(records, 2.0, Slo{.e2el_ms = 1000});
  EXPECT_EQ(s.good, 1);
}

TEST(ServingLoadgen, PoissonArrivalsHaveTheRateAndTheSeed) {
  const auto t = arrival_times(20000, 50.0, 7);
  EXPECT_EQ(t.front(), 0.0);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  const double mean_gap = t.back() / (t.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 50.0,
              0.02 / 50.0 * 3); // within 3 standard errors (exponential: sd = mean)
  // Exponential gaps: the fraction above the mean is e^-1.
  int above = 0;
  for (std::size_t i = 1; i < t.size(); ++i)
    above += (t[i] - t[i - 1]) > 1.0 / 50.0;
  EXPECT_NEAR(above / static_cast<double>(t.size() - 1), std::exp(-1.0), 0.015);
  EXPECT_EQ(arrival_times(10, 50.0, 7), arrival_times(10, 50.0, 7));
  EXPECT_NE(arrival_times(10, 50.0, 7), arrival_times(10, 50.0, 8));
  EXPECT_EQ(arrival_times(3, INFINITY, 7), std::vector<double>(3, 0.0));
}

TEST(ServingLoadgen, RandomPromptsStayInTheTokenRange) {
  const auto p = random_prompts(50, 32, 8, 100, 200, 1);
  ASSERT_EQ(p.size(), 50u);
  for (const auto &x : p) {
    EXPECT_EQ(x.ids.size(), 32u);
    EXPECT_EQ(x.output_len, 8);
    for (const auto t : x.ids)
      EXPECT_TRUE(t >= 100 && t < 200);
  }
  EXPECT_EQ(random_prompts(2, 4, 1, 0, 10, 3)[1].ids, random_prompts(2, 4, 1, 0, 10, 3)[1].ids);
  EXPECT_THROW((void)random_prompts(1, 4, 1, 10, 10, 0), UsageError);
}

TEST(ServingLoadgen, ShareGptLengthsAreCharactersOverFour) {
  const auto path = std::filesystem::temp_directory_path() / "aisp_test_sharegpt.json";
  {
    std::ofstream f(path);
    f << R"([
      {"conversations": [{"from": "human", "value": ")"
      << std::string(40, 'a') << R"("},
                         {"from": "gpt", "value": ")"
      << std::string(80, 'b') << R"("}]},
      {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there"}]},
      {"conversations": [{"from": "human", "value": "only one turn"}]},
      {"prompt_token_ids": [5, 6, 7], "output_len": 9}
    ])";
  }
  auto p = load_dataset(path.string(), 10, 0, 1000, 2000, 4096, 0);
  ASSERT_EQ(p.size(), 2u); // "hi" (1 token) is too short; one turn is no pair
  std::sort(p.begin(), p.end(),
            [](const Prompt &a, const Prompt &b) { return a.ids.size() < b.ids.size(); });
  EXPECT_EQ(p[0].ids, (std::vector<TokenId>{5, 6, 7}));
  EXPECT_EQ(p[0].output_len, 9);
  EXPECT_EQ(p[1].ids.size(), 10u);
  EXPECT_EQ(p[1].output_len, 20);
  for (const auto t : p[1].ids)
    EXPECT_TRUE(t >= 1000 && t < 2000);
  EXPECT_EQ(load_dataset(path.string(), 1, 0, 1000, 2000, 4096, 0).size(), 1u);
  EXPECT_EQ(load_dataset(path.string(), 10, 3, 1000, 2000, 4096, 0)[0].output_len, 3); // override
  std::filesystem::remove(path);
  EXPECT_THROW((void)load_dataset("/nonexistent/x.json", 1, 0, 0, 10, 0, 0), UsageError);
}

TEST(ServingLoadgen, SseParserHandlesSplitEventsUsageAndErrors) {
  SseParser p;
  const std::string stream =
      "data: {\"choices\":[{\"token_ids\":[4]}]}\n\n"
      ": a comment\n\n"
      "data: {\"choices\":[{\"token_ids\":[5,6]}]}\r\n\r\n"
      "data: {\"choices\":[{\"token_ids\":[],\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  // Fed one byte at a time: events split anywhere must come out whole.
  for (std::size_t i = 0; i < stream.size(); ++i)
    p.feed(&stream[i], 1, static_cast<double>(i));
  EXPECT_TRUE(p.done());
  EXPECT_TRUE(p.error().empty());
  EXPECT_EQ(p.tokens(), 3);
  EXPECT_EQ(p.token_times().size(), 2u); // chunks carrying tokens
  EXPECT_EQ(p.usage_completion_tokens(), 3);
  SseParser e;
  const std::string err = "data: {\"error\":{\"message\":\"boom\"}}\n\n";
  EXPECT_FALSE(e.feed(err.data(), err.size(), 0));
  EXPECT_EQ(e.error(), "stream error: boom");
  SseParser text; // a server that sends text instead of ids (vLLM): one token per non-empty chunk
  const std::string t =
      "data: {\"choices\":[{\"text\":\"hi\"}]}\n\ndata: {\"choices\":[{\"text\":\"\"}]}\n\n";
  text.feed(t.data(), t.size(), 0);
  EXPECT_EQ(text.tokens(), 1);
}

int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(ServingLoadgen, UnreachableServerIsAUsageError) {
  EXPECT_THROW((void)probe_server("http://127.0.0.1:" + std::to_string(unused_port())), UsageError);
  EXPECT_THROW((void)probe_server("127.0.0.1:8000"), UsageError);
}

TEST(ServingLoadgen, ShortRunAgainstTheFakeServerGetsEveryRequestBack) {
  FakeEngineOptions eo;
  eo.model_name = "fake";
  eo.vocab_size = 5000;
  eo.token_delay = 1ms;
  FakeEngine engine(eo);
  ServerOptions so;
  so.port = 0;
  so.threads = 32;
  HttpServer server(engine, so);
  server.start();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto info = probe_server(url);
  EXPECT_EQ(info.model, "fake");
  EXPECT_EQ(info.vocab_size, 5000);
  const auto prompts = random_prompts(24, 16, 6, 1000, info.vocab_size, 0);
  for (const auto &[rate, concurrency] :
       std::vector<std::pair<double, int>>{{300.0, 0}, {INFINITY, 4}}) {
    LoadOptions lo;
    lo.url = url;
    lo.model = info.model;
    lo.rate = rate;
    lo.max_concurrency = concurrency;
    lo.progress_every_s = 0;
    const auto result = run_load(lo, prompts);
    ASSERT_EQ(result.records.size(), prompts.size());
    for (const auto &r : result.records) {
      EXPECT_TRUE(r.success) << r.error;
      EXPECT_EQ(r.output_tokens, 6);
      EXPECT_EQ(r.prompt_tokens, 16);
      EXPECT_EQ(r.itl_s.size(), 5u); // one chunk per token
      EXPECT_GT(r.ttft_s, 0);
      EXPECT_GE(r.e2e_s, r.ttft_s);
    }
    const auto s = summarize(result.records, result.duration_s, Slo{.ttft_ms = 10000});
    EXPECT_EQ(s.completed, 24);
    EXPECT_EQ(s.output_tokens, 24 * 6);
    EXPECT_EQ(s.good, 24);
    EXPECT_GT(s.output_throughput, 0);
    // The fake engine exports no engine time counters: no overhead, and no field in the JSON.
    EXPECT_FALSE(result.server_overhead.has_value());
    EXPECT_FALSE(summary_json(s).contains("server_overhead"));
  }
  server.stop();
  EXPECT_EQ(engine.stats().requests_total, 48);
}

TEST(ServingLoadgen, ServerOverheadIsTheCountersDeltaOverTheRun) {
  const EngineCounters before{1.0, 1.1, 10};
  const EngineCounters after{3.0, 3.3, 30};
  const auto o = overhead_between(before, after);
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->runner_s, 2.0);
  EXPECT_DOUBLE_EQ(o->busy_s, 2.2);
  EXPECT_EQ(o->steps, 20);
  ASSERT_TRUE(o->fraction().has_value());
  EXPECT_NEAR(*o->fraction(), 0.1, 1e-12);
  EXPECT_FALSE(overhead_between(std::nullopt, after).has_value());
  EXPECT_FALSE(overhead_between(before, std::nullopt).has_value());
  const auto none = overhead_between(before, before); // no step in the run
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->fraction().has_value());
  Summary s;
  s.server_overhead = o;
  const auto j = summary_json(s).at("server_overhead");
  EXPECT_DOUBLE_EQ(j.at("runner_s").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j.at("busy_s").get<double>(), 2.2);
  EXPECT_EQ(j.at("steps").get<int>(), 20);
  EXPECT_NEAR(j.at("mean_runner_step_ms").get<double>(), 100.0, 1e-9);
  EXPECT_NEAR(j.at("mean_overhead_step_ms").get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(j.at("overhead_fraction").get<double>(), 0.1, 1e-12);
  EXPECT_TRUE(summary_json(Summary{.server_overhead = none})
                  .at("server_overhead")
                  .at("overhead_fraction")
                  .is_null());
  EXPECT_NE(summary_table(s, "t").find("Server overhead (busy - runner) / runner:"),
            std::string::npos);
  EXPECT_NE(summary_table(s, "t").find("10.00%"), std::string::npos);
}

TEST(ServingLoadgen, RunAgainstAnEngineLoopServerReportsItsOverhead) {
  FakeRunnerOptions ro;
  ro.step_sleep = 2ms;
  ro.vocab_size = 5000;
  FakeRunner runner(ro);
  EngineLoop engine(runner, SchedulerConfig{}, "fake");
  ServerOptions so;
  so.port = 0;
  so.threads = 16;
  HttpServer server(engine, so);
  server.start();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  LoadOptions lo;
  lo.url = url;
  lo.model = "fake";
  lo.max_concurrency = 4;
  lo.progress_every_s = 0;
  const auto prompts = random_prompts(12, 16, 8, 1000, ro.vocab_size, 0);
  const auto warm = run_load(lo, prompts); // steps before the measured run must not count in it
  ASSERT_TRUE(warm.server_overhead.has_value());
  const auto result = run_load(lo, prompts);
  for (const auto &r : result.records)
    ASSERT_TRUE(r.success) << r.error;
  ASSERT_TRUE(result.server_overhead.has_value());
  const ServerOverhead &o = *result.server_overhead;
  // 12 requests of 8 tokens, at most 4 together: at least 3 x 8 steps, at most one per token.
  EXPECT_GE(o.steps, 24);
  EXPECT_LE(o.steps, 12 * 8);
  EXPECT_LE(o.steps + warm.server_overhead->steps, engine.stats().steps);
  const double step_s = 2e-3;
  EXPECT_GE(o.runner_s, static_cast<double>(o.steps) * step_s);     // the runner sleeps 2 ms a step
  EXPECT_LT(o.runner_s, static_cast<double>(o.steps) * step_s * 2); // and little else
  EXPECT_GE(o.busy_s, o.runner_s);
  EXPECT_LE(o.busy_s, result.duration_s);
  ASSERT_TRUE(o.fraction().has_value());
  EXPECT_GE(*o.fraction(), 0.0);
  EXPECT_LT(*o.fraction(), 1.0); // a host path costing as much as the steps would be a bug here
  auto s = summarize(result.records, result.duration_s, {});
  s.server_overhead = result.server_overhead;
  EXPECT_EQ(summary_json(s).at("server_overhead").at("steps").get<std::int64_t>(), o.steps);
  server.stop();
}

TEST(ServingLoadgen, RefusedRequestsAreCountedAsFailures) {
  FakeEngineOptions eo;
  eo.model_name = "fake";
  eo.max_waiting = 0; // every submit: queue full
  FakeEngine engine(eo);
  ServerOptions so;
  so.port = 0;
  so.threads = 8;
  HttpServer server(engine, so);
  server.start();
  LoadOptions lo;
  lo.url = "http://127.0.0.1:" + std::to_string(server.port());
  lo.model = "fake";
  lo.progress_every_s = 0;
  const auto result = run_load(lo, random_prompts(5, 4, 2, 0, 100, 0));
  const auto s = summarize(result.records, result.duration_s, {});
  EXPECT_EQ(s.failed, 5);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors.begin()->first.rfind("HTTP 429: the engine's queue is full", 0), 0u)
      << s.errors.begin()->first;
  EXPECT_EQ(failure_line(s).rfind("5 failed: 5 x HTTP 429", 0), 0u);
}

} // namespace
} // namespace aisp::serving
