#include "serving/http_server.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fmt/format.h>
#include <httplib.h>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/base/error.hpp"
#include "serving/api.hpp"
#include "serving/http_common.hpp"
#include "serving/metrics.hpp"

namespace aisp::serving {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

enum class Outcome {
  length,
  stop,
  cancelled,
  error,
  rejected_queue_full,
  rejected_draining,
  invalid
};
constexpr std::array<const char *, 7> k_outcome_names = {
    "length", "stop", "cancelled", "error", "rejected_queue_full", "rejected_draining", "invalid"};

// One generation's hand-off between the engine's thread (the sink pushes events) and the
// connection's thread (the content provider pops them and writes).
struct Generation {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<TokenEvent> events;
  bool finished = false;            // the engine's final event arrived
  std::atomic<bool> counted{false}; // its outcome was counted (exactly once: finish or disconnect)
  RequestId id = -1;
  CompletionRequest request;
  CompletionMeta meta;
  Clock::time_point arrival;
  // Engine-thread side (written by the sink only).
  Clock::time_point first_token;
  Clock::time_point last_token;
  int generated = 0;
  // Connection-thread side.
  std::vector<TokenId> tokens; // non-streamed: the completion so far
  int streamed = 0;            // streamed: tokens written
  Clock::time_point last_write;
  bool done_writing = false;
};

} // namespace

struct HttpServer::Impl {
  Impl(Engine &e, ServerOptions o) : engine(e), options(std::move(o)), info(e.info()) {
    if (!options.served_model_name.empty())
      info.name = options.served_model_name;
    created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    id_prefix = std::random_device{}();
  }

  Engine &engine;
  ServerOptions options;
  ModelInfo info;
  std::int64_t created = 0;
  Listener server;
  std::thread listen_thread;
  int port = -1;
  std::mutex stop_mutex;
  bool started = false;
  bool stopped = false;
  std::atomic<bool> draining{false};
  mutable std::mutex flight_mutex;
  std::condition_variable flight_cv;
  int in_flight = 0; // accepted completions whose response is not released yet
  std::array<std::atomic<std::int64_t>, k_outcome_names.size()> outcomes{};
  Histogram ttft{ttft_buckets()};
  Histogram tpot{tpot_buckets()};
  Histogram e2e{e2e_buckets()};
  Histogram queue{queue_buckets()};
  std::uint32_t id_prefix = 0;
  std::atomic<std::uint64_t> next_id{0};

  void count(Outcome o) { ++outcomes[static_cast<std::size_t>(o)]; }
  void enter_flight() {
    const std::lock_guard lock(flight_mutex);
    ++in_flight;
  }
  void leave_flight() {
    {
      const std::lock_guard lock(flight_mutex);
      --in_flight;
    }
    flight_cv.notify_all();
  }

  void setup_routes();
  void handle_completion(const httplib::Request &req, httplib::Response &res);
  void on_event(Generation &g, const TokenEvent &e);
  bool provide(Generation &g, httplib::DataSink &sink);
  void release(Generation &g);
  [[nodiscard]] std::string render_metrics() const;
};

// Engine thread: timestamps are taken here, where the token is produced, not when a slow socket
// takes it.
void HttpServer::Impl::on_event(Generation &g, const TokenEvent &e) {
  const auto now = Clock::now();
  bool first = false;
  {
    const std::lock_guard lock(g.mutex);
    if (g.finished)
      return; // nothing follows a final event
    if (e.token >= 0) {
      first = g.generated == 0;
      if (first)
        g.first_token = now;
      g.last_token = now;
      ++g.generated;
    }
    g.finished = e.finished;
    g.events.push_back(e);
  }
  g.cv.notify_one();
  if (first)
    ttft.observe(seconds(now - g.arrival));
  if (!e.finished || g.counted.exchange(true))
    return;
  switch (e.reason) {
  case FinishReason::length:
  case FinishReason::stop:
    count(e.reason == FinishReason::length ? Outcome::length : Outcome::stop);
    e2e.observe(seconds(now - g.arrival));
    if (g.generated >= 2)
      tpot.observe(seconds(g.last_token - g.first_token) / (g.generated - 1));
    break;
  case FinishReason::cancelled:
    count(Outcome::cancelled);
    break;
  default:
    count(Outcome::error);
    break;
  }
}

// Connection thread, called by cpp-httplib until sink.done() or a false return (which drops the
// connection). Waits a short while for events so that server shutdown is noticed between calls.
bool HttpServer::Impl::provide(Generation &g, httplib::DataSink &sink) {
  std::deque<TokenEvent> batch;
  {
    std::unique_lock lock(g.mutex);
    g.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !g.events.empty(); });
    batch.swap(g.events);
  }
  const bool stream = g.request.stream;
  std::string out;
  const TokenEvent *final_event = nullptr;
  for (const auto &e : batch) {
    if (e.token >= 0) {
      if (stream) {
        out += sse_event(
            stream_chunk_json(g.meta, {e.token}, FinishReason::none, g.request.include_usage));
        ++g.streamed;
      } else {
        g.tokens.push_back(e.token);
      }
    }
    if (e.finished) {
      final_event = &e;
      break;
    }
  }
  const auto prompt_tokens = static_cast<int>(g.request.prompt.size());
  if (final_event) {
    const bool failed =
        final_event->reason != FinishReason::length && final_event->reason != FinishReason::stop;
    const std::string why = final_event->reason == FinishReason::cancelled
                                ? "the engine cancelled the request"
                                : "the engine failed: " + final_event->error;
    if (stream) {
      if (failed) {
        out += sse_event(error_json(why, "server_error"));
      } else {
        out +=
            sse_event(stream_chunk_json(g.meta, {}, final_event->reason, g.request.include_usage));
        if (g.request.include_usage)
          out += sse_event(usage_chunk_json(g.meta, prompt_tokens, g.streamed));
      }
      out += "data: [DONE]\n\n";
    } else {
      // The 200 status line went out when the request was accepted (see heartbeat): a failure after
      // that can only be reported in the body.
      out += failed ? error_json(why, "server_error")
                    : completion_json(g.meta, g.tokens, final_event->reason, prompt_tokens);
    }
  } else if (!stream && options.heartbeat.count() > 0 &&
             Clock::now() - g.last_write >= options.heartbeat) {
    out += ' ';
  }
  if (!out.empty()) {
    if (!sink.write(out.data(), out.size()))
      return false;
    g.last_write = Clock::now();
  }
  if (final_event) {
    g.done_writing = true;
    sink.done();
  }
  return true;
}

// Connection thread, once per accepted completion, after its response ended (success) or the
// connection failed. A generation still running here has lost its client: cancel it to free its
// blocks.
void HttpServer::Impl::release(Generation &g) {
  bool finished = false;
  {
    const std::lock_guard lock(g.mutex);
    finished = g.finished;
  }
  if (!finished) {
    engine.cancel(g.id);
    if (!g.counted.exchange(true))
      count(Outcome::cancelled);
  }
  leave_flight();
}

void HttpServer::Impl::handle_completion(const httplib::Request &req, httplib::Response &res) {
  const auto arrival = Clock::now();
  if (draining) {
    count(Outcome::rejected_draining);
    reply_error(res, 503, "the server is shutting down", "service_unavailable");
    return;
  }
  auto g = std::make_shared<Generation>();
  try {
    g->request = parse_completion_request(req.body, info);
  } catch (const ApiError &e) {
    count(Outcome::invalid);
    res.status = e.status();
    res.set_content(error_json(e), "application/json");
    return;
  }
  g->arrival = arrival;
  g->meta = CompletionMeta{fmt::format("cmpl-{:08x}{:08x}", id_prefix, next_id++),
                           std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count(),
                           info.name};
  enter_flight();
  SubmitResult submitted;
  try {
    submitted = engine.submit(g->request.to_generation(),
                              [this, g](const TokenEvent &e) { on_event(*g, e); });
  } catch (...) {
    leave_flight(); // the exception handler answers 500; stop() must not wait for this one
    throw;
  }
  switch (submitted.status) {
  case SubmitStatus::accepted:
    break;
  case SubmitStatus::queue_full:
    leave_flight();
    count(Outcome::rejected_queue_full);
    reply_error(res, 429, "the engine's queue is full: " + submitted.message + "; retry later",
                "rate_limit_error", "queue_full");
    return;
  case SubmitStatus::draining:
    leave_flight();
    count(Outcome::rejected_draining);
    reply_error(res, 503, "the server is shutting down", "service_unavailable");
    return;
  case SubmitStatus::invalid:
    leave_flight();
    count(Outcome::invalid);
    reply_error(res, 400, submitted.message, "invalid_request_error");
    return;
  }
  g->id = submitted.id;
  g->last_write = Clock::now();
  queue.observe(seconds(g->last_write - arrival));
  if (g->request.stream)
    res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      g->request.stream ? "text/event-stream" : "application/json",
      [this, g](std::size_t, httplib::DataSink &sink) { return provide(*g, sink); },
      [this, g](bool) { release(*g); });
}

std::string HttpServer::Impl::render_metrics() const {
  const EngineStats s = engine.stats();
  PrometheusWriter w;
  std::vector<std::pair<Labels, double>> outcome_samples;
  for (std::size_t i = 0; i < k_outcome_names.size(); ++i)
    outcome_samples.push_back(
        {{{"outcome", k_outcome_names[i]}}, static_cast<double>(outcomes[i].load())});
  w.counter_family(
      "aisp_requests_total",
      "completion requests by outcome: length and stop finished, cancelled lost their client, "
      "error failed in the engine, rejected_* got 429 or 503, invalid got a 4xx",
      outcome_samples);
  w.gauge("aisp_requests_running", "requests holding KV blocks in the engine", s.running);
  w.gauge("aisp_requests_waiting", "requests queued in the engine, not yet scheduled", s.waiting);
  w.gauge("aisp_kv_blocks_used", "KV-cache blocks in use", s.kv_blocks_used);
  w.gauge("aisp_kv_blocks_total", "KV-cache blocks in the pool", s.kv_blocks_total);
  w.counter("aisp_preemptions_total", "sequences preempted to free KV blocks",
            static_cast<double>(s.preemptions));
  w.counter("aisp_prompt_tokens_total", "prompt tokens of accepted requests (engine count)",
            static_cast<double>(s.prompt_tokens));
  w.counter("aisp_generation_tokens_total", "tokens generated (engine count)",
            static_cast<double>(s.generated_tokens));
  w.counter("aisp_engine_steps_total", "engine steps run", static_cast<double>(s.steps));
  if (s.prefix_cache) {
    // vLLM's prefix_cache_queries / prefix_cache_hits: hit rate = rate(hits) / rate(queries).
    w.counter("aisp_prefix_cache_queries_total", "prompt tokens looked up in the prefix cache",
              static_cast<double>(s.prefix_cache_queried_tokens));
    w.counter("aisp_prefix_cache_hits_total", "of those, found cached (not computed)",
              static_cast<double>(s.prefix_cache_hit_tokens));
    w.gauge("aisp_kv_blocks_cached", "KV blocks indexed by the prefix cache (in use or evictable)",
            s.kv_blocks_cached);
    w.counter("aisp_prefix_cache_evictions_total", "cached KV blocks evicted for other data",
              static_cast<double>(s.prefix_cache_evictions));
  }
  if (s.speculative) {
    // vLLM's spec_decode_num_drafts / _num_draft_tokens / _num_accepted_tokens: acceptance rate =
    // rate(accepted) / rate(draft), tokens per verification = rate(emitted) / rate(verifications).
    w.counter("aisp_spec_decode_verifications_total",
              "speculative verifications: one sequence's drafts checked in one step",
              static_cast<double>(s.spec_verifications));
    w.counter("aisp_spec_decode_draft_tokens_total", "draft tokens verified",
              static_cast<double>(s.spec_draft_tokens));
    w.counter("aisp_spec_decode_accepted_tokens_total", "of those, accepted",
              static_cast<double>(s.spec_accepted_tokens));
    w.counter("aisp_spec_decode_emitted_tokens_total",
              "tokens the verifications emitted (accepted drafts and the target's own)",
              static_cast<double>(s.spec_emitted_tokens));
  }
  if (s.step_timing) {
    // (busy - runner) / runner over an interval is the server path's own overhead per unit of
    // model time (`aisp loadgen` reports it); EngineLoop's run() defines both.
    const auto seconds = [](std::chrono::nanoseconds t) {
      return std::chrono::duration<double>(t).count();
    };
    w.counter("aisp_engine_runner_seconds_total", "time inside the model runner's step(), summed",
              seconds(s.runner_time));
    w.counter("aisp_engine_busy_seconds_total",
              "engine thread's wall time in iterations that ran a step: the runner's step plus the "
              "host work around it (scheduling, token delivery), without the idle waits",
              seconds(s.busy_time));
  }
  {
    const std::lock_guard lock(flight_mutex);
    w.gauge("aisp_http_responses_in_flight",
            "accepted completions whose response is still being written", in_flight);
  }
  w.histogram("aisp_time_to_first_token_seconds",
              "request arrival at the server to its first token leaving the engine",
              ttft.snapshot());
  w.histogram("aisp_time_per_output_token_seconds",
              "per finished request: (last token - first token) / (tokens - 1)", tpot.snapshot());
  w.histogram("aisp_e2e_request_latency_seconds",
              "request arrival to its final token, finished requests", e2e.snapshot());
  w.histogram("aisp_request_queue_time_seconds",
              "request arrival to the engine accepting it (parse and submit; the engine's own "
              "scheduling wait is inside the time to first token)",
              queue.snapshot());
  return w.text();
}

void HttpServer::Impl::setup_routes() {
  server.Post("/v1/completions", [this](const httplib::Request &req, httplib::Response &res) {
    handle_completion(req, res);
  });
  server.Get("/v1/models", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(models_json(info, created), "application/json");
  });
  server.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    res.status = draining ? 503 : 200;
    res.set_content(draining ? R"({"status":"draining"})" : R"({"status":"ok"})",
                    "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(render_metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  install_error_handlers(server);
}

HttpServer::HttpServer(Engine &engine, ServerOptions options)
    : m_impl(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  auto &s = *m_impl;
  const std::lock_guard lock(s.stop_mutex);
  if (s.started)
    throw std::logic_error("HttpServer::start called twice");
  const auto &o = s.options;
  const auto threads = static_cast<std::size_t>(std::max(1, o.threads));
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.server.set_keep_alive_max_count(static_cast<std::size_t>(o.keep_alive_max_requests));
  s.server.set_keep_alive_timeout(o.keep_alive_timeout_s);
  s.server.set_read_timeout(o.read_timeout_s);
  s.server.set_write_timeout(o.write_timeout_s);
  s.server.set_payload_max_length(o.max_body_bytes);
  s.server.set_tcp_nodelay(true); // a token is a small write: Nagle would hold it back
  s.setup_routes();
  s.port = s.server.listen_in_background(o.host, o.port, o.listen_backlog, s.listen_thread);
  s.started = true;
}

int HttpServer::port() const { return m_impl->port; }

bool HttpServer::draining() const { return m_impl->draining; }

void HttpServer::stop() {
  auto &s = *m_impl;
  const std::lock_guard lock(s.stop_mutex);
  if (!s.started || s.stopped)
    return;
  s.stopped = true;
  s.draining = true;
  s.engine.drain();
  {
    // The engine finished every accepted request; their last bytes may still be on their way out.
    std::unique_lock flight(s.flight_mutex);
    s.flight_cv.wait_for(flight, s.options.drain_timeout, [&] { return s.in_flight == 0; });
  }
  s.server.stop();
  s.listen_thread.join();
}

std::string HttpServer::metrics_text() const { return m_impl->render_metrics(); }

} // namespace aisp::serving
