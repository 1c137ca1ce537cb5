// serving/http_server over real loopback sockets and the fake engine: error statuses and bodies,
// streamed and plain completions, cancellation on disconnect, 429 on a full queue, /metrics,
// graceful stop.
#include <arpa/inet.h>
#include <atomic>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "core/base/error.hpp"
#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/http_server.hpp"
#include "serving/metrics.hpp"
#include "serving/testing_engine.hpp"
#include "tests/cpu/serving/served.hpp"

namespace aisp::serving {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::vector<TokenId> expected_tokens(const std::vector<TokenId> &prompt, int n) {
  std::vector<TokenId> out;
  for (int k = 0; k < n; ++k)
    out.push_back(fake_token(prompt, k, 1000));
  return out;
}

// The data payloads of an SSE body, in order.
std::vector<std::string> sse_payloads(const std::string &body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    const auto end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated event: " << body.substr(pos);
      break;
    }
    const auto event = body.substr(pos, end - pos);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

TEST(ServingHttp, BadRequestsGetTheirStatusAndAnErrorJson) {
  Served s;
  auto cli = s.client();
  struct Case {
    std::string body;
    int status;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"{\"prompt\": [1, 2", 400, "malformed JSON"},
      {R"({"prompt":[1],"bogus":true})", 400, "unknown field 'bogus'"},
      {R"({"prompt":[]})", 400, "empty"},
      {R"({"prompt":"once upon a time"})", 400, "tokenizer"},
      {R"({"prompt":[1000]})", 400, "outside the vocabulary"},
      {R"({"prompt":[1],"max_tokens":0})", 400, "at least 1"},
      {R"({"prompt":[1],"max_tokens":-3})", 400, "at least 1"},
      {R"({"prompt":[1],"max_tokens":256})", 400, "maximum context length"},
      {R"({"prompt":[1],"temperature":0.7})", 400, "greedily"},
      {R"({"model":"other","prompt":[1]})", 404, "does not exist"},
  };
  for (const auto &c : cases) {
    const auto r = cli.Post("/v1/completions", c.body, "application/json");
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body;
    const auto j = json::parse(r->body);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.needle), std::string::npos)
        << r->body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  }
  const auto wrong_method = cli.Get("/v1/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
  EXPECT_TRUE(json::parse(wrong_method->body).contains("error"));
  const auto post_health = cli.Post("/health", "{}", "application/json");
  ASSERT_TRUE(post_health);
  EXPECT_EQ(post_health->status, 405);
  const auto unknown = cli.Get("/v2/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "not_found");
  EXPECT_EQ(s.engine.stats().requests_total, 0); // nothing reached the engine
}

TEST(ServingHttp, APortInUseIsAUsageError) {
  Served s;
  FakeEngine other(fast_engine());
  ServerOptions so;
  so.port = s.server->port();
  HttpServer second(other, so);
  EXPECT_THROW(second.start(), UsageError);
}

TEST(ServingHttp, ModelsAndHealth) {
  Served s;
  auto cli = s.client();
  const auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const auto j = json::parse(models->body);
  EXPECT_EQ(j["data"][0]["id"], "fake");
  EXPECT_EQ(j["data"][0]["vocab_size"], 1000);
  const auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
}

TEST(ServingHttp, PlainCompletionReturnsTheFakesTokens) {
  Served s;
  auto cli = s.client();
  const std::vector<TokenId> prompt{5, 6, 7};
  const auto r = cli.Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 5}}.dump(),
                          "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = json::parse(r->body); // leading heartbeat spaces are legal JSON whitespace
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<TokenId>>(), expected_tokens(prompt, 5));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
}

TEST(ServingHttp, StreamedCompletionSendsOneChunkPerTokenThenDone) {
  auto eo = fast_engine();
  eo.separate_final_event = true; // the server must handle a final event without a token too
  Served s(eo);
  auto cli = s.client();
  const std::vector<TokenId> prompt{40, 41};
  const auto body = json{{"prompt", prompt},
                         {"max_tokens", 6},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}}
                        .dump();
  const auto r = cli.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = sse_payloads(r->body);
  ASSERT_EQ(events.size(), 6u + 3u); // 6 tokens, the finish chunk, the usage chunk, [DONE]
  std::vector<TokenId> got;
  for (int i = 0; i < 6; ++i) {
    const auto c = json::parse(events[static_cast<std::size_t>(i)]);
    ASSERT_EQ(c["choices"][0]["token_ids"].size(), 1u);
    got.push_back(c["choices"][0]["token_ids"][0]);
    EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  }
  EXPECT_EQ(got, expected_tokens(prompt, 6));
  EXPECT_EQ(json::parse(events[6])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[7])["usage"]["completion_tokens"], 6);
  EXPECT_EQ(events[8], "[DONE]");
}

TEST(ServingHttp, StopTokenEndsTheStreamWithStop) {
  Served s;
  auto cli = s.client();
  const std::vector<TokenId> prompt{10};
  const TokenId stop = fake_token(prompt, 2, 1000); // the third token
  const auto r = cli.Post(
      "/v1/completions",
      json{{"prompt", prompt}, {"max_tokens", 20}, {"stream", true}, {"stop_token_ids", {stop}}}
          .dump(),
      "application/json");
  ASSERT_TRUE(r);
  const auto events = sse_payloads(r->body);
  ASSERT_EQ(events.size(), 3u + 2u);
  EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "stop");
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0)
    ADD_FAILURE() << "connect failed";
  return fd;
}

void send_completion(int fd, const std::string &body) {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
}

TEST(ServingHttp, ClientThatDisconnectsMidStreamIsCancelled) {
  auto eo = fast_engine();
  eo.token_delay = 5ms;
  Served s(eo);
  const int fd = connect_loopback(s.server->port());
  send_completion(fd, json{{"prompt", {1, 2}}, {"max_tokens", 200}, {"stream", true}}.dump());
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // The first accepted request of a fresh fake engine has id 1; 200 tokens would take a second.
  EXPECT_TRUE(s.engine.wait_for_cancel(1, 1000ms));
}

TEST(ServingHttp, ClientThatDisconnectsBeforeAPlainResponseIsCancelled) {
  auto eo = fast_engine();
  eo.token_delay = 20ms;
  Served s(eo);
  const int fd = connect_loopback(s.server->port());
  send_completion(fd, json{{"prompt", {1, 2}}, {"max_tokens", 200}}.dump());
  std::this_thread::sleep_for(50ms);
  ::close(fd);
  // Noticed through the heartbeat (100 ms here): 200 tokens would take 4 s.
  EXPECT_TRUE(s.engine.wait_for_cancel(1, 1000ms));
}

TEST(ServingHttp, FullQueueGets429) {
  auto eo = fast_engine();
  eo.max_waiting = 2;
  eo.max_running = 1;
  Served s(eo);
  s.engine.set_paused(true);
  std::vector<std::thread> waiting;
  std::atomic<int> ok{0};
  for (int i = 0; i < 2; ++i)
    waiting.emplace_back([&] {
      auto cli = s.client();
      const auto r =
          cli.Post("/v1/completions", R"({"prompt":[1],"max_tokens":2})", "application/json");
      if (r && r->status == 200)
        ++ok;
    });
  for (int i = 0; i < 500 && s.engine.stats().waiting < 2; ++i)
    std::this_thread::sleep_for(2ms);
  ASSERT_EQ(s.engine.stats().waiting, 2);
  auto cli = s.client();
  const auto r =
      cli.Post("/v1/completions", R"({"prompt":[1],"max_tokens":2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("queue is full"),
            std::string::npos);
  s.engine.set_paused(false);
  for (auto &t : waiting)
    t.join();
  EXPECT_EQ(ok, 2);
  const auto m = parse_prometheus_text(s.server->metrics_text());
  EXPECT_EQ(m.value(R"(aisp_requests_total{outcome="rejected_queue_full"})"), 1);
}

TEST(ServingHttp, MetricsParseAndMove) {
  Served s;
  auto cli = s.client();
  const auto before_r = cli.Get("/metrics");
  ASSERT_TRUE(before_r);
  EXPECT_EQ(before_r->status, 200);
  EXPECT_NE(before_r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const auto before = parse_prometheus_text(before_r->body);
  ASSERT_TRUE(cli.Post("/v1/completions", R"({"prompt":[3,4],"max_tokens":4,"stream":true})",
                       "application/json"));
  ASSERT_TRUE(
      cli.Post("/v1/completions", R"({"prompt":[3,4],"max_tokens":3})", "application/json"));
  ASSERT_TRUE(cli.Post("/v1/completions", R"({"prompt":[]})", "application/json"));
  // A request is counted when its handler returns, which can be just after the client has read the last
  // chunk: wait (up to 1 s) until both completions are counted rather than race them (ctest -j2 once saw
  // the streamed one missing).
  auto after = parse_prometheus_text(cli.Get("/metrics")->body);
  for (int i = 0; i < 1000 && after.value(R"(aisp_requests_total{outcome="length"})") -
                                      before.value(R"(aisp_requests_total{outcome="length"})") < 2;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    after = parse_prometheus_text(cli.Get("/metrics")->body);
  }
  const auto delta = [&](const std::string &series) {
    return after.value(series) - before.value(series);
  };
  EXPECT_EQ(delta(R"(aisp_requests_total{outcome="length"})"), 2);
  EXPECT_EQ(delta(R"(aisp_requests_total{outcome="invalid"})"), 1);
  EXPECT_EQ(delta("aisp_generation_tokens_total"), 7);
  EXPECT_EQ(delta("aisp_prompt_tokens_total"), 4);
  EXPECT_EQ(delta("aisp_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(delta("aisp_time_per_output_token_seconds_count"), 2);
  EXPECT_EQ(delta("aisp_e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(delta("aisp_request_queue_time_seconds_count"), 2);
  EXPECT_GT(after.value("aisp_engine_steps_total"), 0);
  EXPECT_EQ(after.types.at("aisp_kv_blocks_total"), "gauge");
  EXPECT_EQ(after.value("aisp_kv_blocks_total"), 4096);
  // The fake engine times no runner: no engine time counters rather than zeros that look measured.
  EXPECT_EQ(after.types.count("aisp_engine_runner_seconds_total"), 0u);
  EXPECT_EQ(after.types.count("aisp_engine_busy_seconds_total"), 0u);
}

TEST(ServingHttp, MetricsCarryTheEngineLoopsRunnerAndBusyTime) {
  FakeRunnerOptions ro;
  ro.step_sleep = 1ms;
  FakeRunner runner(ro);
  EngineLoop engine(runner, SchedulerConfig{}, "fake");
  ServerOptions so;
  so.port = 0;
  so.threads = 4;
  so.keep_alive_timeout_s = 1;
  HttpServer server(engine, so);
  server.start();
  httplib::Client cli("127.0.0.1", server.port());
  cli.set_read_timeout(10);
  const auto before = parse_prometheus_text(cli.Get("/metrics")->body);
  EXPECT_EQ(before.types.at("aisp_engine_runner_seconds_total"), "counter");
  EXPECT_EQ(before.types.at("aisp_engine_busy_seconds_total"), "counter");
  EXPECT_EQ(before.value("aisp_engine_runner_seconds_total"), 0);
  EXPECT_EQ(before.value("aisp_engine_busy_seconds_total"), 0);
  for (int i = 0; i < 3; ++i) {
    const auto r = cli.Post("/v1/completions", R"({"prompt":[3,4,5],"max_tokens":5})",
                            "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  // A body's last token leaves the engine just before its step's times are published, with the
  // request counted finished.
  for (int i = 0; i < 200 && engine.stats().requests_finished < 3; ++i)
    std::this_thread::sleep_for(5ms);
  const auto raw = cli.Get("/metrics");
  ASSERT_TRUE(raw);
  const auto after = parse_prometheus_text(raw->body);
  const double runner_s = after.value("aisp_engine_runner_seconds_total");
  const double busy_s = after.value("aisp_engine_busy_seconds_total");
  const double steps = after.value("aisp_engine_steps_total");
  EXPECT_EQ(steps, 15); // 3 requests one after the other, 5 tokens each: one step per token
  EXPECT_GE(runner_s, steps * 1e-3); // every step sleeps 1 ms
  EXPECT_GE(busy_s, runner_s);
  // Nothing of the time between requests (the client's round trips) is busy time.
  EXPECT_LT(busy_s, runner_s + 0.5);
  server.stop();
}

TEST(ServingHttp, StopDrainsInFlightStreams) {
  auto eo = fast_engine();
  eo.token_delay = 5ms;
  Served s(eo);
  const int n_tokens = 60;
  std::atomic<bool> first_token{false};
  std::string body;
  int status = 0;
  std::thread client([&] {
    auto cli = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", {9}}, {"max_tokens", n_tokens}, {"stream", true}}.dump();
    req.response_handler = [&](const httplib::Response &r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char *d, std::size_t n, std::uint64_t, std::uint64_t) {
      body.append(d, n);
      first_token = true;
      return true;
    };
    httplib::Response res;
    httplib::Error err;
    cli.send(req, res, err);
  });
  while (!first_token)
    std::this_thread::sleep_for(1ms);
  std::thread stopper([&] { s.server->stop(); });
  // While it drains: /health says so and new completions are refused.
  bool saw_draining = false;
  for (int i = 0; i < 200 && !saw_draining; ++i) {
    auto cli = s.client();
    const auto h = cli.Get("/health");
    if (h && h->status == 503) {
      saw_draining = true;
      const auto r = cli.Post("/v1/completions", R"({"prompt":[1]})", "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 503);
    }
    std::this_thread::sleep_for(1ms);
  }
  stopper.join();
  client.join();
  EXPECT_TRUE(saw_draining);
  EXPECT_EQ(status, 200);
  const auto events = sse_payloads(body);
  ASSERT_EQ(events.size(), static_cast<std::size_t>(n_tokens) + 2u); // every token, finish, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_TRUE(s.engine.cancel_calls().empty());
  auto cli = s.client();
  EXPECT_FALSE(cli.Get("/health")); // no longer listening
}

TEST(ServingHttp, EngineErrorReachesTheClient) {
  auto eo = fast_engine();
  eo.error_after_tokens = 2;
  Served s(eo);
  auto cli = s.client();
  const auto r = cli.Post("/v1/completions", R"({"prompt":[1],"max_tokens":5,"stream":true})",
                          "application/json");
  ASSERT_TRUE(r);
  const auto events = sse_payloads(r->body);
  ASSERT_EQ(events.size(), 2u + 2u); // two tokens, the error, [DONE]
  EXPECT_EQ(json::parse(events[2])["error"]["type"], "server_error");
  // The server counts the outcome once the stream's last chunk is written, which can land just after
  // the client has read it: wait for the count (up to 1 s) rather than race it (a ctest -j2 run saw 0).
  double errors = 0;
  for (int i = 0; i < 1000 && errors == 0; ++i) {
    errors = parse_prometheus_text(s.server->metrics_text()).value(R"(aisp_requests_total{outcome="error"})");
    if (errors == 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(errors, 1);
}

} // namespace
} // namespace aisp::serving
