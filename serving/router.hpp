// `aisp route`: an OpenAI-compatible front over several engine processes (`aisp serve`). Each
// POST /v1/completions goes to one backend, chosen by a RoutingPolicy (serving/route_policy.hpp),
// and its answer is relayed as it comes: status, Content-Type and body unchanged, a stream chunk
// by chunk. A client that disconnects makes the router drop its upstream connection, so that the
// backend cancels the request and frees its KV blocks. Backends that refuse connections or fail
// GET /health leave the rotation until a later health check passes; with none up, completions get
// 503. GET /v1/models is relayed from an up backend; /health and /metrics are the router's own.
// cpp-httplib underneath, kept out of this header. docs/routing.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "serving/route_policy.hpp"

namespace aisp::serving {

// http://HOST:PORT (an optional trailing "/"; no other path, no https): what --backend takes.
struct BackendAddress {
  std::string host;
  int port = 0;
  std::string url; // normalized: "http://HOST:PORT"
};
// Throws aisp::UsageError naming the URL and what is wrong with it.
[[nodiscard]] BackendAddress parse_backend_url(std::string_view url);

// What the router reads from a completion body to route it: the prompt's ids (empty when the body
// is not a valid request: the backend will refuse it, with its own 4xx) and the request's token
// cost, prompt + max_tokens (16, the API's default, when absent or not a positive integer).
struct RoutingView {
  std::vector<TokenId> prompt;
  std::int64_t cost_tokens = 0;
};
[[nodiscard]] RoutingView routing_view(std::string_view body);

struct RouterOptions {
  std::vector<std::string> backends; // URLs, http://HOST:PORT
  std::string policy = "round-robin";
  PrefixPolicyOptions prefix;
  std::string host = "127.0.0.1"; // loopback unless told otherwise: no authentication
  int port = 8100;                // 0: any free port (port() says which)
  int threads = 512;              // client connections served at once (as `aisp serve`)
  int listen_backlog = 1024;
  int keep_alive_timeout_s = 5;
  std::size_t max_body_bytes = 64u << 20;
  // A backend out of rotation is checked again this often (GET /health); those in rotation too,
  // so that a draining one (503) leaves it. 0: only start() and check_health() check.
  std::chrono::milliseconds health_interval{1000};
  std::chrono::milliseconds connect_timeout{2000};
  int upstream_read_timeout_s = 600; // a backend silent this long fails the request
  std::chrono::seconds drain_timeout{600};
  // Backend up/down transitions, one line each (the CLI prints them; default: silent).
  std::function<void(const std::string &)> log;
};

// One backend as GET /metrics reports it.
struct BackendStatus {
  std::string url;
  bool up = false;
  std::int64_t requests = 0;           // completions forwarded to it (connected)
  std::int64_t outstanding_tokens = 0; // prompt + max_tokens of those not finished yet
};

class Router {
public:
  // Validates the options (at least one backend, each URL, no duplicates, the policy): throws
  // aisp::UsageError before anything listens.
  explicit Router(RouterOptions options);
  ~Router(); // stop() if still running
  Router(const Router &) = delete;
  Router &operator=(const Router &) = delete;

  // Checks every backend once, binds and serves on a background thread; throws aisp::UsageError
  // when the address cannot be bound.
  void start();
  [[nodiscard]] int port() const;
  // New completions get 503, in-flight ones are relayed to their end, then the router stops
  // listening. Idempotent.
  void stop();
  // One round of GET /health on every backend, now (the background checker does the same).
  void check_health();
  [[nodiscard]] std::vector<BackendStatus> backends() const;
  [[nodiscard]] std::string_view policy_name() const;
  [[nodiscard]] std::string metrics_text() const;

  struct Impl;

private:
  std::unique_ptr<Impl> m_impl;
};

} // namespace aisp::serving
