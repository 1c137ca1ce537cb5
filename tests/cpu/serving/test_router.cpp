// `aisp route`: the routing policies' decisions on scripted load sequences (pure), the URL and body
// readers, and the router over real loopback sockets in front of fake-engine servers: relayed
// bodies equal to direct ones (streamed and not), the distribution per policy, a dead backend
// skipped and taken back after a health check, 503 with none, 4xx passed through unchanged, a
// client disconnect cancelling the backend's request, and `aisp loadgen`'s client through it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "core/base/error.hpp"
#include "serving/http_server.hpp"
#include "serving/loadgen.hpp"
#include "serving/metrics.hpp"
#include "serving/route_policy.hpp"
#include "serving/router.hpp"
#include "serving/testing_engine.hpp"
#include "tests/cpu/serving/served.hpp"

namespace aisp::serving {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::vector<BackendLoad> loads(std::initializer_list<std::int64_t> tokens) {
  std::vector<BackendLoad> out;
  for (const auto t : tokens)
    out.push_back({true, t});
  return out;
}

TEST(RoutePolicy, RoundRobinCyclesAndSkipsDownBackends) {
  RoundRobinPolicy p;
  auto l = loads({0, 0, 0});
  std::vector<int> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(p.choose({}, l).backend);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 0}));
  l[1].up = false;
  got.clear();
  for (int i = 0; i < 4; ++i)
    got.push_back(p.choose({}, l).backend);
  EXPECT_EQ(got, (std::vector<int>{2, 0, 2, 0}));
  EXPECT_EQ(p.choose({}, l).reason, RouteReason::round_robin);
  for (auto &b : l)
    b.up = false;
  const auto none = p.choose({}, l);
  EXPECT_EQ(none.backend, -1);
  EXPECT_EQ(none.reason, RouteReason::none);
}

TEST(RoutePolicy, LeastTokensPicksTheLightestAndRotatesTies) {
  LeastTokensPolicy p;
  EXPECT_EQ(p.choose({}, loads({100, 50, 70})).backend, 1);
  // Equal loads go round in order after the previous pick (1): 2, 0, 1.
  const auto idle = loads({0, 0, 0});
  EXPECT_EQ(p.choose({}, idle).backend, 2);
  EXPECT_EQ(p.choose({}, idle).backend, 0);
  EXPECT_EQ(p.choose({}, idle).backend, 1);
  auto l = loads({100, 0, 70});
  l[1].up = false; // the lightest is out of rotation
  const auto d = p.choose({}, l);
  EXPECT_EQ(d.backend, 2);
  EXPECT_EQ(d.reason, RouteReason::least_tokens);
  l[0].up = l[2].up = false;
  EXPECT_EQ(p.choose({}, l).backend, -1);
}

TEST(RoutePolicy, PrefixKeepsAPrefixOnItsBackendWithinTheBound) {
  PrefixPolicy p({.prefix_tokens = 4, .load_bound_tokens = 100, .max_entries = 8});
  const std::vector<TokenId> a{1, 2, 3, 4, 9};
  const std::vector<TokenId> a2{1, 2, 3, 4, 7, 7}; // same first block, another tail
  const std::vector<TokenId> b{5, 6, 7, 8};
  auto d = p.choose(a, loads({0, 0, 0}));
  EXPECT_EQ(d.backend, 0);
  EXPECT_EQ(d.reason, RouteReason::prefix_miss);
  p.routed(a, 0);
  d = p.choose(a2, loads({50, 0, 0})); // 50 above the least: within the bound
  EXPECT_EQ(d.backend, 0);
  EXPECT_EQ(d.reason, RouteReason::prefix_hit);
  p.routed(a2, 0);
  d = p.choose(b, loads({50, 0, 0}));
  EXPECT_EQ(d.backend, 1);
  EXPECT_EQ(d.reason, RouteReason::prefix_miss);
  p.routed(b, 1);
  d = p.choose(a, loads({150, 40, 0})); // 150 above the least: beyond the bound
  EXPECT_EQ(d.backend, 2);
  EXPECT_EQ(d.reason, RouteReason::prefix_overloaded);
  p.routed(a, 2);
  EXPECT_EQ(p.remembered(a2), 2); // the backend that served the prefix last
  d = p.choose(a2, loads({150, 40, 100}));
  EXPECT_EQ(d.backend, 2); // exactly at the bound: kept
  EXPECT_EQ(d.reason, RouteReason::prefix_hit);
  auto l = loads({0, 30, 0});
  l[2].up = false;
  d = p.choose(a, l);
  EXPECT_EQ(d.backend, 0);
  EXPECT_EQ(d.reason, RouteReason::prefix_down);
  d = p.choose(std::vector<TokenId>{1, 2, 3}, loads({0, 0, 0}));
  EXPECT_GE(d.backend, 0);
  EXPECT_EQ(d.reason, RouteReason::prefix_short);
  p.routed(std::vector<TokenId>{1, 2, 3}, 1);
  EXPECT_EQ(p.size(), 2u); // short prompts are not remembered
  for (auto &x : l)
    x.up = false;
  EXPECT_EQ(p.choose(a, l).backend, -1);
}

TEST(RoutePolicy, PrefixMapIsAnLruWithACap) {
  PrefixPolicy p({.prefix_tokens = 2, .load_bound_tokens = 0, .max_entries = 2});
  const std::vector<TokenId> p1{1, 1, 5}, p2{2, 2}, p3{3, 3, 9};
  EXPECT_EQ(p.prefix_key(p1), p.prefix_key(std::vector<TokenId>{1, 1, 6}));
  EXPECT_NE(p.prefix_key(p1), p.prefix_key(p2));
  EXPECT_FALSE(p.prefix_key(std::vector<TokenId>{1}));
  p.routed(p1, 0);
  p.routed(p2, 1);
  p.routed(p1, 0); // p1 used again: p2 is now the least recently used
  p.routed(p3, 2);
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.remembered(p1), 0);
  EXPECT_FALSE(p.remembered(p2));
  EXPECT_EQ(p.remembered(p3), 2);
}

TEST(RoutePolicy, NamesAndBadOptions) {
  EXPECT_EQ(make_routing_policy("round-robin")->name(), "round-robin");
  EXPECT_EQ(make_routing_policy("least-tokens")->name(), "least-tokens");
  EXPECT_EQ(make_routing_policy("prefix")->name(), "prefix");
  EXPECT_THROW((void)make_routing_policy("random"), UsageError);
  EXPECT_THROW(PrefixPolicy({.prefix_tokens = 0}), UsageError);
  EXPECT_EQ(route_reason_name(RouteReason::prefix_overloaded), "prefix_overloaded");
}

TEST(RouteUrl, ParsesHttpHostPortAndRefusesTheRest) {
  const auto a = parse_backend_url("http://127.0.0.1:8000");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8000);
  EXPECT_EQ(a.url, "http://127.0.0.1:8000");
  EXPECT_EQ(parse_backend_url("http://localhost:8001/").url, "http://localhost:8001");
  for (const char *bad : {"127.0.0.1:8000", "https://h:1", "http://h", "http://h:0", "http://h:70000",
                          "http://h:80/v1", "http://:80", "http://h:8x", ""})
    EXPECT_THROW((void)parse_backend_url(bad), UsageError) << bad;
}

TEST(RouteView, ReadsThePromptAndTheCost) {
  auto v = routing_view(R"({"prompt":[1,2,3],"max_tokens":5})");
  EXPECT_EQ(v.prompt, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(v.cost_tokens, 8);
  v = routing_view(R"({"prompt":[[4,5]]})");
  EXPECT_EQ(v.prompt, (std::vector<TokenId>{4, 5}));
  EXPECT_EQ(v.cost_tokens, 2 + 16); // the API's default max_tokens
  v = routing_view("{\"prompt\": [1, 2");
  EXPECT_TRUE(v.prompt.empty());
  EXPECT_EQ(v.cost_tokens, 16);
  EXPECT_TRUE(routing_view(R"({"prompt":"text","max_tokens":-4})").prompt.empty());
  EXPECT_TRUE(routing_view(R"({"prompt":[1,"x"]})").prompt.empty());
}

TEST(RouterOptionsCheck, BadOptionsAreUsageErrorsBeforeListening) {
  RouterOptions o;
  EXPECT_THROW(Router{o}, UsageError); // no backend
  o.backends = {"http://127.0.0.1:1", "http://127.0.0.1:1/"};
  EXPECT_THROW(Router{o}, UsageError); // the same one twice
  o.backends = {"http://127.0.0.1:1"};
  o.policy = "fastest";
  EXPECT_THROW(Router{o}, UsageError);
  o.policy = "prefix";
  o.port = 70000;
  EXPECT_THROW(Router{o}, UsageError);
}

// --- the router over loopback sockets ---

using Backend = Served; // one `aisp serve` with a fake engine behind the router

struct Routed {
  Routed(int n, const std::string &policy, FakeEngineOptions eo = fast_engine()) {
    RouterOptions ro;
    for (int i = 0; i < n; ++i) {
      backends.push_back(std::make_unique<Backend>(eo));
      ro.backends.push_back(backends.back()->url());
    }
    ro.policy = policy;
    ro.port = 0;
    ro.threads = 16;
    ro.keep_alive_timeout_s = 1;
    ro.health_interval = 0ms; // the tests call check_health() themselves
    router = std::make_unique<Router>(ro);
    router->start();
  }
  [[nodiscard]] httplib::Client client() const {
    httplib::Client c("127.0.0.1", router->port());
    c.set_read_timeout(10);
    return c;
  }
  [[nodiscard]] httplib::Client direct(std::size_t i) const {
    httplib::Client c("127.0.0.1", backends[i]->server->port());
    c.set_read_timeout(10);
    return c;
  }
  [[nodiscard]] std::vector<std::int64_t> engine_requests() const {
    std::vector<std::int64_t> out;
    for (const auto &b : backends)
      out.push_back(b->engine.stats().requests_total);
    return out;
  }
  // The router releases a request's tokens when its upstream thread ends, which can be just after
  // the client has read the last byte: wait (bounded) rather than race it.
  [[nodiscard]] bool wait_all_finished() const {
    for (int i = 0; i < 2000; ++i) {
      bool idle = true;
      for (const auto &b : router->backends())
        idle = idle && b.outstanding_tokens == 0;
      if (idle)
        return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
  std::vector<std::unique_ptr<Backend>> backends; // declared first: destroyed after the router
  std::unique_ptr<Router> router;
};

json without_ids(json j) {
  j.erase("id");
  j.erase("created");
  return j;
}

std::vector<json> sse_chunks(const std::string &body) {
  std::vector<json> out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    const auto end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated event: " << body.substr(pos);
      break;
    }
    const auto payload = body.substr(pos + 6, end - pos - 6);
    out.push_back(payload == "[DONE]" ? json("[DONE]") : without_ids(json::parse(payload)));
    pos = end + 2;
  }
  return out;
}

std::string completion(const std::vector<TokenId> &prompt, int max_tokens, bool stream = false) {
  json j{{"prompt", prompt}, {"max_tokens", max_tokens}};
  if (stream) {
    j["stream"] = true;
    j["stream_options"] = {{"include_usage", true}};
  }
  return j.dump();
}

TEST(RouterHttp, RelayedBodiesEqualDirectOnesStreamedAndNot) {
  Routed r(2, "round-robin");
  auto cli = r.client();
  auto direct = r.direct(0);
  const std::vector<TokenId> prompt{5, 6, 7};
  const auto via = cli.Post("/v1/completions", completion(prompt, 5), "application/json");
  const auto ref = direct.Post("/v1/completions", completion(prompt, 5), "application/json");
  ASSERT_TRUE(via && ref);
  ASSERT_EQ(via->status, 200) << via->body;
  EXPECT_EQ(without_ids(json::parse(via->body)), without_ids(json::parse(ref->body)));
  const auto via_s = cli.Post("/v1/completions", completion(prompt, 6, true), "application/json");
  const auto ref_s = direct.Post("/v1/completions", completion(prompt, 6, true), "application/json");
  ASSERT_TRUE(via_s && ref_s);
  ASSERT_EQ(via_s->status, 200) << via_s->body;
  EXPECT_NE(via_s->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto chunks = sse_chunks(via_s->body);
  EXPECT_EQ(chunks.size(), 6u + 3u); // 6 tokens, the finish chunk, usage, [DONE]
  EXPECT_EQ(chunks, sse_chunks(ref_s->body));
  EXPECT_EQ(r.engine_requests(), (std::vector<std::int64_t>{3, 1})); // 2 direct, then round robin: 0, 1
}

TEST(RouterHttp, RoundRobinSpreadsEvenly) {
  Routed r(3, "round-robin");
  auto cli = r.client();
  for (int i = 0; i < 6; ++i) {
    const auto res = cli.Post("/v1/completions", completion({1, 2, i}, 3), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }
  EXPECT_EQ(r.engine_requests(), (std::vector<std::int64_t>{2, 2, 2}));
  ASSERT_TRUE(r.wait_all_finished());
  const auto m = parse_prometheus_text(r.router->metrics_text());
  for (const auto &b : r.backends) {
    EXPECT_EQ(m.value("aisp_router_requests_total{backend=\"" + b->url() + "\"}"), 2);
    EXPECT_EQ(m.value("aisp_router_outstanding_tokens{backend=\"" + b->url() + "\"}"), 0);
    EXPECT_EQ(m.value("aisp_router_backend_up{backend=\"" + b->url() + "\"}"), 1);
  }
  EXPECT_EQ(m.value(R"(aisp_router_policy_decisions_total{policy="round-robin",decision="round_robin"})"),
            6);
}

TEST(RouterHttp, LeastTokensAvoidsTheBusyBackend) {
  Routed r(3, "least-tokens");
  r.backends[0]->engine.set_paused(true); // its request stays outstanding
  std::optional<httplib::Result> held;
  std::thread holder([&] {
    auto cli = r.client();
    held.emplace(cli.Post("/v1/completions", completion({1, 2}, 50), "application/json"));
  });
  // The first pick among equals is backend 0; wait until the router counts it there.
  for (int i = 0; i < 5000 && r.router->backends()[0].requests == 0; ++i)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(r.router->backends()[0].requests, 1);
  EXPECT_EQ(r.router->backends()[0].outstanding_tokens, 52);
  auto cli = r.client();
  for (int i = 0; i < 4; ++i) {
    const auto res = cli.Post("/v1/completions", completion({3, i}, 2), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    // Until the router has released this request's tokens the next pick would see them.
    for (int k = 0; k < 2000 && r.router->backends()[1].outstanding_tokens +
                                        r.router->backends()[2].outstanding_tokens >
                                    0;
         ++k)
      std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(r.engine_requests(), (std::vector<std::int64_t>{1, 2, 2}));
  r.backends[0]->engine.set_paused(false);
  holder.join();
  ASSERT_TRUE(held && *held);
  EXPECT_EQ(json::parse((*held)->body)["choices"][0]["token_ids"].size(), 50u);
  EXPECT_TRUE(r.wait_all_finished());
}

TEST(RouterHttp, PrefixKeepsASharedPrefixOnOneBackend) {
  Routed r(3, "prefix");
  auto cli = r.client();
  std::vector<TokenId> system;
  for (int i = 0; i < 16; ++i) // one block of a shared "system prompt"
    system.push_back(100 + i);
  const auto send = [&](std::vector<TokenId> prompt) {
    const auto res = cli.Post("/v1/completions", completion(prompt, 2), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  };
  for (int turn = 0; turn < 4; ++turn) {
    auto p = system;
    p.insert(p.end(), {turn, turn + 1});
    send(p);
  }
  std::vector<TokenId> other(20, 7);
  send(other);  // a new prefix: least tokens, rotating past backend 0
  send(system); // back on backend 0
  EXPECT_EQ(r.engine_requests(), (std::vector<std::int64_t>{5, 1, 0}));
  const auto m = parse_prometheus_text(r.router->metrics_text());
  EXPECT_EQ(m.value(R"(aisp_router_policy_decisions_total{policy="prefix",decision="prefix_hit"})"), 4);
  EXPECT_EQ(m.value(R"(aisp_router_policy_decisions_total{policy="prefix",decision="prefix_miss"})"),
            2);
}

TEST(RouterHttp, DeadBackendIsSkippedAndComesBackAfterAHealthCheck) {
  Routed r(3, "round-robin");
  const int port = r.backends[1]->server->port();
  r.backends[1]->server->stop();
  auto cli = r.client();
  const auto send_all = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const auto res = cli.Post("/v1/completions", completion({9, i}, 2), "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
    }
  };
  send_all(6);
  EXPECT_EQ(r.engine_requests(), (std::vector<std::int64_t>{3, 0, 3}));
  EXPECT_FALSE(r.router->backends()[1].up);
  const auto m = parse_prometheus_text(r.router->metrics_text());
  EXPECT_EQ(m.value("aisp_router_retries_total"), 1); // once refused, it is out of rotation
  r.router->check_health();
  EXPECT_FALSE(r.router->backends()[1].up);
  r.backends[1] = std::make_unique<Backend>(fast_engine(), ServerOptions{}, port); // a fresh server, same port
  r.router->check_health();
  EXPECT_TRUE(r.router->backends()[1].up);
  send_all(3);
  EXPECT_EQ(r.backends[1]->engine.stats().requests_total, 1);
}

TEST(RouterHttp, NoBackendIs503) {
  Routed r(2, "least-tokens");
  for (auto &b : r.backends)
    b->server->stop();
  auto cli = r.client();
  const auto res = cli.Post("/v1/completions", completion({1}, 2), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  const auto j = json::parse(res->body);
  EXPECT_EQ(j["error"]["type"], "service_unavailable");
  EXPECT_EQ(j["error"]["code"], "no_backend");
  const auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(json::parse(health->body)["status"], "no_backend");
  const auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 503);
  EXPECT_EQ(parse_prometheus_text(r.router->metrics_text()).value("aisp_router_no_backend_total"),
            2);
}

TEST(RouterHttp, BadRequestsPassThroughUnchanged) {
  Routed r(1, "prefix");
  auto cli = r.client();
  auto direct = r.direct(0);
  for (const std::string &body :
       {std::string("{\"prompt\": [1, 2"), std::string(R"({"prompt":[]})"),
        std::string(R"({"prompt":[1],"bogus":true})"), std::string(R"({"model":"other","prompt":[1]})"),
        std::string(R"({"prompt":[1],"max_tokens":256})")}) {
    const auto via = cli.Post("/v1/completions", body, "application/json");
    const auto ref = direct.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(via && ref) << body;
    EXPECT_GE(via->status, 400) << body;
    EXPECT_EQ(via->status, ref->status) << body;
    EXPECT_EQ(via->body, ref->body) << body;
    EXPECT_EQ(via->get_header_value("Content-Type"), ref->get_header_value("Content-Type"));
  }
  const auto wrong_method = cli.Get("/v1/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
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

// Sends a completion on a raw socket, reads until `needle` arrives, then closes the socket.
void send_and_drop(int port, const std::string &body, const std::string &needle) {
  const int fd = connect_loopback(port);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
}

TEST(RouterHttp, ClientDisconnectCancelsTheBackendsRequest) {
  auto eo = fast_engine();
  eo.token_delay = 5ms;
  Routed r(1, "round-robin", eo);
  send_and_drop(r.router->port(), completion({1, 2}, 200, true), "data: ");
  // 200 tokens would take a second: the cancel must come well before the request ends by itself.
  EXPECT_TRUE(r.backends[0]->engine.wait_for_cancel(1, 2000ms));
  // A plain request: noticed through the backend's heartbeat spaces, relayed (100 ms here).
  send_and_drop(r.router->port(), completion({1, 2}, 200), "\r\n\r\n");
  EXPECT_TRUE(r.backends[0]->engine.wait_for_cancel(2, 2000ms));
  EXPECT_TRUE(r.wait_all_finished());
}

TEST(RouterHttp, ModelsHealthAndMetrics) {
  Routed r(2, "prefix");
  auto cli = r.client();
  const auto models = cli.Get("/v1/models");
  const auto ref = r.direct(0).Get("/v1/models");
  ASSERT_TRUE(models && ref);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->body, ref->body);
  const auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["backends_up"], 2);
  const auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const auto m = parse_prometheus_text(metrics->body);
  EXPECT_EQ(m.types.at("aisp_router_requests_total"), "counter");
  EXPECT_EQ(m.types.at("aisp_router_outstanding_tokens"), "gauge");
  EXPECT_EQ(m.types.at("aisp_router_policy_decisions_total"), "counter");
  EXPECT_EQ(m.value(R"(aisp_router_policy_decisions_total{policy="prefix",decision="prefix_short"})"),
            0);
}

TEST(RouterHttp, LoadgenRunsUnchangedThroughTheRouter) {
  Routed r(2, "least-tokens");
  const std::string url = "http://127.0.0.1:" + std::to_string(r.router->port());
  const auto info = probe_server(url);
  EXPECT_EQ(info.model, "fake");
  EXPECT_EQ(info.vocab_size, 1000);
  LoadOptions lo;
  lo.url = url;
  lo.model = info.model;
  lo.rate = 0;
  lo.max_concurrency = 8;
  lo.progress_every_s = 0;
  const auto result = run_load(lo, random_prompts(24, 8, 4, 0, 1000, 1));
  for (const auto &rec : result.records) {
    EXPECT_TRUE(rec.success) << rec.error;
    EXPECT_EQ(rec.output_tokens, 4);
  }
  const auto n = r.engine_requests();
  EXPECT_EQ(n[0] + n[1], 24);
  EXPECT_GT(n[0], 0);
  EXPECT_GT(n[1], 0);
  EXPECT_FALSE(result.server_overhead); // the router exports no engine time counters
}

} // namespace
} // namespace aisp::serving
