// Soak test (issue 15, "Robustness"): 10,000 requests through the real HTTP server over loopback
// onto an EngineLoop whose Scheduler and BlockManager run over the FakeRunner (test_http_server.cpp
// uses the FakeEngine, which has no block manager: the leak this test hunts would not show there).
// The mix: plain and streamed completions checked token by token against fake_reference() (a block
// freed while still in use, or reused stale, changes the tokens), clients that disconnect
// mid-stream, malformed JSON and max_tokens <= 0, and bursts from a handful of client threads. Once
// idle: every KV block is free, the scheduler holds nothing, the outcome counters of /metrics add
// up to what was sent, and resident memory did not grow with the request count.
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <httplib.h>
#include <malloc.h>
#include <mutex>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "serving/engine_loop.hpp"
#include "serving/fake_runner.hpp"
#include "serving/http_server.hpp"
#include "serving/metrics.hpp"

namespace aisp::serving {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int k_vocab = 1000;
constexpr int k_blocks = 1024;
constexpr int k_requests = 10000;
constexpr int k_round = 100; // requests per round
constexpr int k_warmup_rounds = 10;
constexpr int k_burst_threads = 4; // every fifth round is a burst from this many clients

// One request in twenty of each rare kind; the rest are plain (10) and streamed (7) completions.
enum class Kind { plain, streamed, disconnect, malformed, bad_max_tokens };
Kind kind_of(int i) {
  const int r = i % 20;
  if (r < 10)
    return Kind::plain;
  if (r < 17)
    return Kind::streamed;
  if (r == 17)
    return Kind::disconnect;
  return r == 18 ? Kind::malformed : Kind::bad_max_tokens;
}

// Short prompts and generations, so that 10,000 requests take seconds; varied, so that block tables
// of 1 and 2 blocks (16-token blocks) come and go in every order.
GenerationRequest request_for(int i) {
  GenerationRequest r;
  for (int k = 0; k < 1 + i % 8; ++k)
    r.prompt.push_back((i * 7 + k * 13) % k_vocab);
  r.max_tokens = 1 + (i / 3) % 10;
  return r;
}

struct Tally {
  std::atomic<int> sent{0};
  std::atomic<int> completions{0}; // plain + streamed, answered 200 with the reference tokens
  std::atomic<int> disconnects{0};
  std::atomic<int> bad{0}; // answered 400
  std::atomic<int> failures{0};
  std::mutex mutex;
  std::string first_failure;

  void fail(int i, const std::string& what) {
    if (failures++ == 0) {
      const std::lock_guard lock(mutex);
      first_failure = "request " + std::to_string(i) + ": " + what;
    }
  }
};

httplib::Client make_client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true); // one connection per client: 10,000 closes would pile up TIME_WAITs
  // The client writes a request's headers and body separately: with Nagle's algorithm the body
  // waits for the server's delayed ACK (40 ms a request on Linux, six minutes for the soak).
  c.set_tcp_nodelay(true);
  c.set_read_timeout(10);
  return c;
}

// The tokens of an SSE body, or an error text when it is not token chunks, a finish chunk and
// [DONE].
std::string stream_tokens(const std::string& body, std::vector<TokenId>& tokens) {
  std::size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    const auto end = body.find("\n\n", pos);
    if (end == std::string::npos || body.compare(pos, 6, "data: ") != 0)
      return "bad event framing: " + body.substr(pos);
    const auto payload = body.substr(pos + 6, end - pos - 6);
    pos = end + 2;
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    const auto c = json::parse(payload);
    if (c.contains("error"))
      return "error event: " + payload;
    for (const auto& t : c["choices"][0]["token_ids"])
      tokens.push_back(t.get<TokenId>());
  }
  return done ? "" : "no [DONE]";
}

// Sends a streamed request on a raw socket, reads until the first token chunk and closes: the
// server must notice, cancel the request and get its KV blocks back. The generation is long
// (thousands of steps) so that it is still running when the client goes.
void disconnect_mid_stream(int i, int port, Tally& t) {
  auto r = request_for(i);
  r.max_tokens = 2048;
  const auto body = json{{"prompt", r.prompt}, {"max_tokens", r.max_tokens}, {"stream", true}}.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: "
                          "127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    t.fail(i, "connect or send failed");
    ::close(fd);
    return;
  }
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      t.fail(i, "connection ended before the first token: " + got);
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  ++t.disconnects;
}

void send_one(int i, httplib::Client& cli, int port, Tally& t) {
  ++t.sent;
  const Kind kind = kind_of(i);
  if (kind == Kind::disconnect) {
    disconnect_mid_stream(i, port, t);
    return;
  }
  const auto r = request_for(i);
  std::string body;
  switch (kind) {
  case Kind::plain:
    body = json{{"prompt", r.prompt}, {"max_tokens", r.max_tokens}}.dump();
    break;
  case Kind::streamed:
    body = json{{"prompt", r.prompt}, {"max_tokens", r.max_tokens}, {"stream", true}}.dump();
    break;
  case Kind::malformed:
    body = json{{"prompt", r.prompt}}.dump();
    body.pop_back(); // no closing brace
    break;
  default:
    body = json{{"prompt", r.prompt}, {"max_tokens", -(i % 2)}}.dump(); // 0 or -1
    break;
  }
  const auto res = cli.Post("/v1/completions", body, "application/json");
  if (!res) {
    t.fail(i, "no response: " + httplib::to_string(res.error()));
    return;
  }
  if (kind == Kind::malformed || kind == Kind::bad_max_tokens) {
    if (res->status != 400)
      t.fail(i, "expected 400, got " + std::to_string(res->status) + ": " + res->body);
    else
      ++t.bad;
    return;
  }
  if (res->status != 200) {
    t.fail(i, "HTTP " + std::to_string(res->status) + ": " + res->body);
    return;
  }
  std::vector<TokenId> tokens;
  if (kind == Kind::streamed) {
    const auto err = stream_tokens(res->body, tokens);
    if (!err.empty()) {
      t.fail(i, err);
      return;
    }
  } else {
    tokens = json::parse(res->body)["choices"][0]["token_ids"].get<std::vector<TokenId>>();
  }
  if (tokens != fake_reference(r, k_vocab).tokens) {
    t.fail(i, "tokens differ from fake_reference: " + res->body);
    return;
  }
  ++t.completions;
}

// Rounds [first, last) of k_round requests each; request indices are global, so the mix does not
// depend on how the rounds are split.
void run_rounds(int first, int last, httplib::Client& cli, int port, Tally& t) {
  for (int round = first; round < last; ++round) {
    const int base = round * k_round;
    if (round % 5 != 4) {
      for (int i = base; i < base + k_round; ++i)
        send_one(i, cli, port, t);
      continue;
    }
    std::vector<std::thread> clients;
    for (int c = 0; c < k_burst_threads; ++c)
      clients.emplace_back([&, c] {
        auto own = make_client(port);
        for (int i = base + c; i < base + k_round; i += k_burst_threads)
          send_one(i, own, port, t);
      });
    for (auto& c : clients)
      c.join();
  }
}

// Idle: the engine finished everything it accepted and the server released every response (a
// disconnected client's request is cancelled asynchronously, after its socket failed).
bool wait_idle(const EngineLoop& engine, const HttpServer& server) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto s = engine.stats();
    if (s.waiting == 0 && s.running == 0 && s.requests_finished == s.requests_total &&
        parse_prometheus_text(server.metrics_text()).value("aisp_http_responses_in_flight") == 0)
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

long vm_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6)); // "VmRSS:	   12345 kB"
  ADD_FAILURE() << "no VmRSS in /proc/self/status";
  return 0;
}

// Bytes the process's malloc holds allocated right now, every arena (glibc's mallinfo2 walks them all):
// live allocations only, unlike VmRSS, which also counts memory freed but kept by the allocator.
long heap_in_use_kib() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
}

TEST(ServingSoak, TenThousandRequestsLeaveEveryBlockFreeAndMemoryFlat) {
  static_assert(k_requests % k_round == 0);
  FakeRunnerOptions ro;
  ro.num_kv_blocks = k_blocks; // room for a few 2048-token disconnecting streams at once
  ro.vocab_size = k_vocab;
  ro.max_context = 4096;
  ro.step_sleep = 0us; // the minimum: the test measures bookkeeping, not simulated GPU time
  FakeRunner runner(ro);
  EngineLoop engine(runner, SchedulerConfig{}, "fake");
  ServerOptions so;
  so.port = 0;
  so.threads = 16; // the main client, the burst clients and the disconnecting sockets fit
  so.keep_alive_timeout_s = 1;
  so.heartbeat = 100ms;
  HttpServer server(engine, so);
  server.start();
  const int port = server.port();
  auto cli = make_client(port);
  Tally t;

  const auto start = std::chrono::steady_clock::now();
  run_rounds(0, k_warmup_rounds, cli, port, t);
  ASSERT_TRUE(wait_idle(engine, server)) << "not idle after the warm-up";
  const long rss_warm_kib = vm_rss_kib();
  const long heap_warm_kib = heap_in_use_kib();
  run_rounds(k_warmup_rounds, k_requests / k_round, cli, port, t);
  ASSERT_TRUE(wait_idle(engine, server)) << "not idle after the soak";
  const long rss_end_kib = vm_rss_kib();
  const long heap_end_kib = heap_in_use_kib();
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EXPECT_EQ(t.failures, 0) << t.first_failure;
  EXPECT_EQ(t.sent, k_requests);
  // Every KV block is back on the free list and nothing is left in the scheduler (the engine's
  // snapshot is taken from its BlockManager and Scheduler after the last finish).
  const auto s = engine.stats();
  EXPECT_EQ(s.kv_blocks_total, k_blocks);
  EXPECT_EQ(s.kv_blocks_total - s.kv_blocks_used, k_blocks) << "blocks still in use";
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.requests_finished, s.requests_total);
  EXPECT_EQ(s.requests_total,
            t.completions + t.disconnects); // bad requests never reach it

  // The counters a scraper sees add up: served + cancelled + rejected = sent.
  auto metrics_res = cli.Get("/metrics");
  ASSERT_TRUE(metrics_res);
  const auto m = parse_prometheus_text(metrics_res->body);
  const auto outcome = [&](const char* name) {
    return static_cast<int>(m.value(std::string("aisp_requests_total{outcome=\"") + name + "\"}"));
  };
  const int served = outcome("length") + outcome("stop");
  const int cancelled = outcome("cancelled");
  const int rejected = outcome("invalid") + outcome("rejected_queue_full") + outcome("rejected_draining");
  EXPECT_EQ(outcome("error"), 0);
  EXPECT_EQ(served + cancelled + rejected, t.sent);
  EXPECT_EQ(outcome("invalid"), t.bad);
  EXPECT_EQ(served + cancelled, t.completions + t.disconnects);
  // A disconnect whose generation ended before the server noticed counts as served; most must be
  // real cancellations or the disconnect path went untested.
  EXPECT_GT(cancelled, t.disconnects / 2);
  EXPECT_LE(cancelled, t.disconnects);
  EXPECT_EQ(m.value("aisp_kv_blocks_used"), 0);
  EXPECT_EQ(m.value("aisp_requests_running"), 0);
  EXPECT_EQ(m.value("aisp_requests_waiting"), 0);

  // Flat memory: the bytes malloc holds allocated (heap_in_use_kib) after the soak against after the
  // warm-up, once the engine is idle. After the warm-up every thread (16 server, the clients', the
  // engine's) exists and the engine's step history (capped at 1024 steps) is full, so what is retained
  // per request is all that can still grow. Live bytes, not VmRSS: VmRSS also holds memory freed but kept
  // by the allocator, which depends on how many requests overlapped, and so on the machine's load (a
  // VmRSS bound of 4 MiB failed once at 4.4 MiB under a parallel ctest with no leak). Measured here
  // (2026-11-28): 150-270 KiB of growth, alone or beside two busy processes, and 233 KiB after 40,000
  // requests instead of 10,000: one-time settling, not per request. A leak of L bytes per request grows
  // the live bytes by L x 9,000: the bound of 2 MiB catches any of about 230 bytes or more (a lost
  // Generation with its queue, request and strings is larger).
  constexpr long k_bound_kib = 2 * 1024;
  std::printf("[ soak ] %d requests in %.1f s: %d completions, %d disconnects (%d cancelled), %d bad; heap in "
              "use after warm-up %ld KiB, at the end %ld KiB (growth %ld KiB, bound %ld KiB); VmRSS %ld -> %ld "
              "KiB\n",
              t.sent.load(), elapsed_s, t.completions.load(), t.disconnects.load(), cancelled, t.bad.load(),
              heap_warm_kib, heap_end_kib, heap_end_kib - heap_warm_kib, k_bound_kib, rss_warm_kib, rss_end_kib);
  EXPECT_LT(heap_end_kib - heap_warm_kib, k_bound_kib);
  server.stop();
}

} // namespace
} // namespace aisp::serving
