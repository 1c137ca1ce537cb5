// A FakeEngine behind an HttpServer on a loopback port, for the CPU tests that talk HTTP to `aisp serve`
// (test_http_server.cpp) or put a router in front of several (test_router.cpp).
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>

#include "serving/http_server.hpp"
#include "serving/testing_engine.hpp"

namespace aisp::serving {

// A fast fake model: 1 ms per token, vocabulary 1000, context 256.
inline FakeEngineOptions fast_engine() {
  FakeEngineOptions o;
  o.model_name = "fake";
  o.vocab_size = 1000;
  o.max_context = 256;
  o.token_delay = std::chrono::milliseconds(1);
  return o;
}

struct Served {
  // Listens on `port` (0: any free one) with the tests' server options over `so`'s others.
  explicit Served(FakeEngineOptions eo = fast_engine(), ServerOptions so = {}, int port = 0)
      : engine(std::move(eo)) {
    so.port = port;
    so.threads = 16;
    so.keep_alive_timeout_s = 1;
    so.heartbeat = std::chrono::milliseconds(100);
    server = std::make_unique<HttpServer>(engine, so);
    server->start();
  }
  [[nodiscard]] httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(10);
    return c;
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(server->port()); }
  FakeEngine engine;
  std::unique_ptr<HttpServer> server;
};

} // namespace aisp::serving
