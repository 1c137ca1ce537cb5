// The upstream half of one completion forwarded by `aisp route` (serving/router.cpp, its only
// user): the request to the backend on its own thread, and the hand-off of the answer's status
// line and body bytes to the client connection's thread. Internal: it exposes cpp-httplib, which
// serving/router.hpp keeps out of its users' includes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <httplib.h>
#include <mutex>
#include <string>
#include <thread>

#include "serving/router.hpp"

namespace aisp::serving::router_detail {

// One forwarded completion. cpp-httplib's client blocks until the response ends, so the upstream
// request runs on its own thread and hands the status line and the body's bytes, as they arrive,
// to the client connection's thread, which writes them out.
class Upstream {
public:
  Upstream(const BackendAddress &address, const RouterOptions &o)
      : m_client(address.host, address.port) {
    m_client.set_connection_timeout(o.connect_timeout);
    m_client.set_read_timeout(o.upstream_read_timeout_s);
    m_client.set_write_timeout(30);
    m_client.set_keep_alive(false);  // one connection per request: nothing pooled to go stale
    m_client.set_tcp_nodelay(true);  // a small body must not wait for a delayed ACK
  }
  ~Upstream() {
    cancel();
    join();
  }
  Upstream(const Upstream &) = delete;
  Upstream &operator=(const Upstream &) = delete;

  void start(const httplib::Request &in, std::function<void()> on_done) {
    httplib::Request out;
    out.method = "POST";
    out.path = "/v1/completions";
    out.body = in.body;
    out.set_header("Content-Type", in.has_header("Content-Type")
                                       ? in.get_header_value("Content-Type")
                                       : std::string("application/json"));
    // Relay the bytes as the backend writes them: a compressed response would sit in the
    // backend's compressor (heartbeat spaces, stream chunks) instead of flowing.
    out.set_header("Accept-Encoding", "identity");
    m_thread = std::thread([this, out = std::move(out), on_done = std::move(on_done)]() mutable {
      run(out);
      on_done();
    });
  }

  // Waits for the status line or the end (an error before any answer).
  void wait_for_headers() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_headers || m_done; });
  }
  void wait_for_end() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_done; });
  }
  [[nodiscard]] bool refused() const {
    const std::lock_guard lock(m_mutex);
    return m_done && !m_headers && m_error == httplib::Error::Connection;
  }
  [[nodiscard]] bool answered() const {
    const std::lock_guard lock(m_mutex);
    return m_headers;
  }
  [[nodiscard]] int status() const { return m_status; }                          // once answered
  [[nodiscard]] const std::string &content_type() const { return m_content_type; } // once answered
  [[nodiscard]] const std::string &cache_control() const { return m_cache_control; }
  [[nodiscard]] std::string error_text() const {
    const std::lock_guard lock(m_mutex);
    return httplib::to_string(m_error);
  }
  [[nodiscard]] std::string take_body() { // after wait_for_end()
    const std::lock_guard lock(m_mutex);
    return std::move(m_pending);
  }

  // The client connection's thread: the bytes that arrived (waiting a short while for some, so
  // that a server shutting down is noticed between calls), written out; false drops the client's
  // connection (the backend failed mid-response, or the client is gone).
  bool relay(httplib::DataSink &sink) {
    std::string out;
    bool done = false;
    bool failed = false;
    {
      std::unique_lock lock(m_mutex);
      m_cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !m_pending.empty() || m_done; });
      out.swap(m_pending);
      done = m_done;
      failed = m_error != httplib::Error::Success;
    }
    if (!out.empty() && !sink.write(out.data(), out.size()))
      return false;
    if (done) {
      if (failed)
        return false; // a truncated response must not end like a complete one
      sink.done();
    }
    return true;
  }

  // Drops the upstream connection: the backend notices at its next write and cancels the request.
  void cancel() {
    m_cancelled = true;
    m_client.stop();
  }
  void join() {
    if (m_thread.joinable())
      m_thread.join();
  }

private:
  void run(httplib::Request &req) {
    req.response_handler = [this](const httplib::Response &r) {
      {
        const std::lock_guard lock(m_mutex);
        m_status = r.status;
        m_content_type = r.get_header_value("Content-Type");
        m_cache_control = r.get_header_value("Cache-Control");
        m_headers = true;
      }
      m_cv.notify_all();
      return !m_cancelled.load();
    };
    req.content_receiver = [this](const char *data, std::size_t n, std::uint64_t, std::uint64_t) {
      {
        const std::lock_guard lock(m_mutex);
        m_pending.append(data, n);
      }
      m_cv.notify_all();
      return !m_cancelled.load();
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    m_client.send(req, res, error);
    {
      const std::lock_guard lock(m_mutex);
      m_error = error;
      m_done = true;
    }
    m_cv.notify_all();
  }

  httplib::Client m_client;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_headers = false;
  int m_status = 0;
  std::string m_content_type;
  std::string m_cache_control;
  std::string m_pending; // body bytes received, not yet relayed
  bool m_done = false;
  httplib::Error m_error = httplib::Error::Success;
  std::atomic<bool> m_cancelled{false};
  std::thread m_thread;
};

} // namespace aisp::serving::router_detail
