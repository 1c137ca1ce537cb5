// The OpenAI-compatible HTTP front of an Engine (cpp-httplib underneath, kept out of this header):
//   POST /v1/completions  token-id prompts, streamed (server-sent events) or not (serving/api.hpp)
//   GET  /v1/models       the served model
//   GET  /health          200 {"status":"ok"}, 503 while draining
//   GET  /metrics         Prometheus text (docs/serving.md lists the series)
// Each connection is served by one thread of a fixed pool (a keep-alive connection keeps its
// thread), so `threads` bounds the connections served at once. A generation's tokens go from the
// engine's sink into a per-request queue that the connection's thread drains into the socket; a
// client that disconnects makes the server cancel its request so the engine frees its KV blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "serving/engine_api.hpp"

namespace aisp::serving {

struct ServerOptions {
  std::string host = "127.0.0.1"; // loopback unless told otherwise: the API has no authentication
  int port = 8000;                // 0: any free port (port() says which)
  std::string served_model_name;  // "" = the engine's ModelInfo::name
  int threads = 512;              // connection threads = connections served at once
  int listen_backlog = 1024;      // cpp-httplib listens with a backlog of 5; bursts need more
  std::size_t max_body_bytes = 64u << 20;
  int keep_alive_max_requests = 100000; // requests per connection before the server closes it
  int keep_alive_timeout_s = 5; // idle keep-alive connections close after this (and stop() waits)
  int read_timeout_s = 30;
  int write_timeout_s = 30; // a client that stops reading is dropped (and cancelled) after it
  // A non-streamed response has nothing to write until the end; every `heartbeat` it writes one
  // space (JSON allows leading whitespace) so that a vanished client is noticed and its request
  // cancelled. 0 disables it. Streams need none: each token is a write.
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::seconds drain_timeout{
      600}; // stop(): longest wait for in-flight responses to be written
};

class HttpServer {
public:
  HttpServer(Engine &engine, ServerOptions options);
  ~HttpServer(); // stop() if still running
  HttpServer(const HttpServer &) = delete;
  HttpServer &operator=(const HttpServer &) = delete;

  // Binds and serves on a background thread; throws aisp::UsageError when the address cannot be
  // bound.
  void start();
  [[nodiscard]] int port() const;
  // Graceful shutdown: new completions get 503 (and /health 503), the engine drains every accepted
  // request, the server waits for their responses to be written, then stops listening. Idempotent.
  void stop();
  [[nodiscard]] bool draining() const;
  // The /metrics text.
  [[nodiscard]] std::string metrics_text() const;

  struct Impl;

private:
  std::unique_ptr<Impl> m_impl;
};

} // namespace aisp::serving
