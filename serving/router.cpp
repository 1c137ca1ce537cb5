#include "serving/router.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <fmt/format.h>
#include <httplib.h>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/base/error.hpp"
#include "serving/api.hpp"
#include "serving/http_common.hpp"
#include "serving/metrics.hpp"
#include "serving/router_upstream.hpp"

namespace aisp::serving {

BackendAddress parse_backend_url(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return UsageError(fmt::format("--backend '{}': {} (expected http://HOST:PORT)", url, why));
  };
  constexpr std::string_view scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw bad("https is not supported: the router speaks plain HTTP to its backends");
  if (url.rfind(scheme, 0) != 0)
    throw bad("not an http:// URL");
  std::string_view rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/')
    rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    throw bad("a backend URL has no path: the router adds /v1/completions itself");
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    throw bad("no HOST:PORT");
  const std::string_view host = rest.substr(0, colon);
  const std::string_view port_text = rest.substr(colon + 1);
  int port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
    throw bad(fmt::format("'{}' is not a TCP port", port_text));
  if (host.find_first_of(" @?#[]") != std::string_view::npos)
    throw bad("a host name or an IPv4 address is expected");
  return {std::string(host), port, fmt::format("http://{}:{}", host, port)};
}

RoutingView routing_view(std::string_view body) {
  RoutingView view;
  std::int64_t max_tokens = 16;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    const auto it = j.find("prompt");
    const nlohmann::json *prompt = it == j.end() ? nullptr : &*it;
    if (prompt && prompt->is_array() && prompt->size() == 1 && prompt->front().is_array())
      prompt = &prompt->front(); // [[ids]]: one sequence, as the API takes it
    if (prompt && prompt->is_array()) {
      for (const auto &id : *prompt) {
        if (!id.is_number_integer()) {
          view.prompt.clear();
          break;
        }
        view.prompt.push_back(id.get<TokenId>());
      }
    }
    const auto mt = j.find("max_tokens");
    if (mt != j.end() && mt->is_number_integer() && mt->get<std::int64_t>() > 0)
      max_tokens = mt->get<std::int64_t>();
  }
  view.cost_tokens = static_cast<std::int64_t>(view.prompt.size()) + max_tokens;
  return view;
}

namespace {

using namespace std::chrono_literals;
using router_detail::Upstream;

struct BackendState {
  BackendAddress address;
  bool up = true;
  std::int64_t requests = 0;
  std::int64_t outstanding_tokens = 0;
};

} // namespace

struct Router::Impl {
  explicit Impl(RouterOptions o) : options(std::move(o)) {
    if (options.backends.empty())
      throw UsageError("route needs at least one --backend URL (an `aisp serve` to forward to)");
    std::set<std::string> seen;
    for (const auto &url : options.backends) {
      auto address = parse_backend_url(url);
      if (!seen.insert(address.url).second)
        throw UsageError(fmt::format("--backend {} is given twice", address.url));
      backends.push_back(BackendState{std::move(address)});
    }
    policy = make_routing_policy(options.policy, options.prefix);
    if (options.port < 0 || options.port > 65535)
      throw UsageError(fmt::format("--port {} is not a TCP port", options.port));
  }

  RouterOptions options;
  mutable std::mutex mutex; // backends, policy, decisions
  std::vector<BackendState> backends;
  std::unique_ptr<RoutingPolicy> policy;
  std::map<RouteReason, std::int64_t> decisions;
  std::atomic<std::int64_t> retries{0};
  std::atomic<std::int64_t> no_backend{0};
  std::atomic<std::int64_t> upstream_errors{0};

  Listener server;
  std::thread listen_thread;
  int port = -1;
  std::mutex stop_mutex;
  bool started = false;
  bool stopped = false;
  std::atomic<bool> draining{false};
  mutable std::mutex flight_mutex;
  std::condition_variable flight_cv;
  int in_flight = 0;
  std::mutex health_mutex;
  std::condition_variable health_cv;
  bool health_stop = false;
  std::thread health_thread;

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
  void log(const std::string &line) const {
    if (options.log)
      options.log(line);
  }
  void set_up(std::size_t b, bool up, const std::string &why) {
    bool changed = false;
    std::string url;
    {
      const std::lock_guard lock(mutex);
      changed = backends[b].up != up;
      backends[b].up = up;
      url = backends[b].address.url;
    }
    if (changed)
      log(up ? fmt::format("backend {} is back in rotation", url)
             : fmt::format("backend {} out of rotation: {}", url, why));
  }
  void release_tokens(std::size_t b, std::int64_t cost) {
    const std::lock_guard lock(mutex);
    backends[b].outstanding_tokens -= cost;
  }

  void check_health();
  void handle_completion(const httplib::Request &req, httplib::Response &res);
  void handle_models(httplib::Response &res);
  void setup_routes();
  [[nodiscard]] std::string render_metrics() const;
};

void Router::Impl::check_health() {
  for (std::size_t b = 0; b < backends.size(); ++b) {
    const BackendAddress address = backends[b].address; // immutable after construction
    httplib::Client cli(address.host, address.port);
    cli.set_connection_timeout(options.connect_timeout);
    cli.set_read_timeout(2);
    const auto r = cli.Get("/health");
    if (!r)
      set_up(b, false, fmt::format("GET /health: {}", httplib::to_string(r.error())));
    else
      set_up(b, r->status == 200, fmt::format("GET /health answered {}", r->status));
  }
}

void Router::Impl::handle_completion(const httplib::Request &req, httplib::Response &res) {
  if (draining) {
    reply_error(res, 503, "the router is shutting down", "service_unavailable");
    return;
  }
  const RoutingView view = routing_view(req.body);
  std::shared_ptr<Upstream> up;
  // A refused connection takes its backend out of rotation and the request tries the next one;
  // the bound only matters when health checks keep putting a refusing backend back meanwhile.
  for (std::size_t attempt = 0;; ++attempt) {
    RouteDecision d;
    {
      const std::lock_guard lock(mutex);
      std::vector<BackendLoad> loads;
      for (const auto &s : backends)
        loads.push_back({s.up, s.outstanding_tokens});
      if (attempt <= backends.size())
        d = policy->choose(view.prompt, loads);
      if (d.backend >= 0)
        backends[static_cast<std::size_t>(d.backend)].outstanding_tokens += view.cost_tokens;
    }
    if (d.backend < 0) {
      ++no_backend;
      reply_error(res, 503, "no backend is available: every one refused or failed its health check",
                  "service_unavailable", "no_backend");
      return;
    }
    const auto b = static_cast<std::size_t>(d.backend);
    up = std::make_shared<Upstream>(backends[b].address, options);
    up->start(req, [this, b, cost = view.cost_tokens] { release_tokens(b, cost); });
    up->wait_for_headers();
    if (up->refused()) {
      up.reset(); // joins its thread
      set_up(b, false, "connection refused");
      ++retries;
      continue;
    }
    {
      const std::lock_guard lock(mutex);
      ++backends[b].requests;
      ++decisions[d.reason];
      // Only an accepted request leaves its prefix's KV blocks on the backend (not a 4xx or 429).
      if (up->answered() && up->status() == 200)
        policy->routed(view.prompt, d.backend);
    }
    if (!up->answered()) {
      ++upstream_errors;
      reply_error(res, 502,
                  fmt::format("backend {} failed before answering: {}", backends[b].address.url,
                              up->error_text()),
                  "server_error", "bad_gateway");
      return;
    }
    break;
  }
  const std::string content_type =
      up->content_type().empty() ? std::string("application/json") : up->content_type();
  if (up->status() != 200) {
    // An error answer is short and whole: relay it with its status, type and body unchanged.
    up->wait_for_end();
    res.status = up->status();
    res.set_content(up->take_body(), content_type);
    return;
  }
  if (!up->cache_control().empty())
    res.set_header("Cache-Control", up->cache_control());
  enter_flight();
  res.set_chunked_content_provider(
      content_type, [up](std::size_t, httplib::DataSink &sink) { return up->relay(sink); },
      [this, up](bool success) {
        if (!success)
          up->cancel(); // the client is gone (or the router stops): the backend cancels
        up->join();
        leave_flight();
      });
}

void Router::Impl::handle_models(httplib::Response &res) {
  for (std::size_t b = 0; b < backends.size(); ++b) {
    {
      const std::lock_guard lock(mutex);
      if (!backends[b].up)
        continue;
    }
    httplib::Client cli(backends[b].address.host, backends[b].address.port);
    cli.set_connection_timeout(options.connect_timeout);
    cli.set_read_timeout(10);
    const auto r = cli.Get("/v1/models");
    if (!r) {
      if (r.error() == httplib::Error::Connection)
        set_up(b, false, "connection refused");
      continue;
    }
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type"));
    return;
  }
  ++no_backend;
  reply_error(res, 503, "no backend is available to list the models", "service_unavailable",
              "no_backend");
}

std::string Router::Impl::render_metrics() const {
  std::vector<std::pair<Labels, double>> requests;
  std::vector<std::pair<Labels, double>> outstanding;
  std::vector<std::pair<Labels, double>> up;
  std::vector<std::pair<Labels, double>> decided;
  {
    const std::lock_guard lock(mutex);
    for (const auto &s : backends) {
      requests.push_back({{{"backend", s.address.url}}, static_cast<double>(s.requests)});
      outstanding.push_back({{{"backend", s.address.url}}, static_cast<double>(s.outstanding_tokens)});
      up.push_back({{{"backend", s.address.url}}, s.up ? 1.0 : 0.0});
    }
    for (const auto reason : policy->reasons()) {
      const auto it = decisions.find(reason);
      decided.push_back({{{"policy", std::string(policy->name())},
                          {"decision", std::string(route_reason_name(reason))}},
                         it == decisions.end() ? 0.0 : static_cast<double>(it->second)});
    }
  }
  PrometheusWriter w;
  w.counter_family("aisp_router_requests_total",
                   "completions forwarded to each backend (connection accepted)", requests);
  w.counter_family("aisp_router_policy_decisions_total",
                   "routing decisions by reason: prefix_hit kept a prefix on its backend, the "
                   "other prefix_* fell back to least tokens",
                   decided);
  w.counter("aisp_router_retries_total",
            "completions sent to another backend after a refused connection",
            static_cast<double>(retries.load()));
  w.counter("aisp_router_no_backend_total", "requests answered 503 because no backend was up",
            static_cast<double>(no_backend.load()));
  w.counter("aisp_router_upstream_errors_total",
            "completions whose backend failed before answering (502)",
            static_cast<double>(upstream_errors.load()));
  {
    const std::lock_guard lock(flight_mutex);
    w.gauge("aisp_router_responses_in_flight", "accepted completions still being relayed",
            in_flight);
  }
  w.gauge_family("aisp_router_outstanding_tokens",
                 "prompt + max_tokens of the backend's unfinished requests, as the router counts",
                 outstanding);
  w.gauge_family("aisp_router_backend_up",
                 "1 while the backend is in rotation, 0 after a refused connection or a failed "
                 "health check",
                 up);
  return w.text();
}

void Router::Impl::setup_routes() {
  server.Post("/v1/completions", [this](const httplib::Request &req, httplib::Response &res) {
    handle_completion(req, res);
  });
  server.Get("/v1/models",
             [this](const httplib::Request &, httplib::Response &res) { handle_models(res); });
  server.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    int n_up = 0;
    {
      const std::lock_guard lock(mutex);
      for (const auto &s : backends)
        n_up += s.up ? 1 : 0;
    }
    const char *status = draining ? "draining" : n_up == 0 ? "no_backend" : "ok";
    res.status = draining || n_up == 0 ? 503 : 200;
    res.set_content(nlohmann::json{{"status", status},
                                   {"backends_up", n_up},
                                   {"backends", backends.size()}}
                        .dump(),
                    "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(render_metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  install_error_handlers(server);
}

Router::Router(RouterOptions options) : m_impl(std::make_unique<Impl>(std::move(options))) {}

Router::~Router() { stop(); }

void Router::start() {
  auto &s = *m_impl;
  const std::lock_guard lock(s.stop_mutex);
  if (s.started)
    throw std::logic_error("Router::start called twice");
  // A backend that closes while the router writes to it must be an error, not a signal.
  std::signal(SIGPIPE, SIG_IGN);
  s.check_health();
  const auto &o = s.options;
  const auto threads = static_cast<std::size_t>(std::max(1, o.threads));
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.server.set_keep_alive_timeout(o.keep_alive_timeout_s);
  s.server.set_read_timeout(30);
  s.server.set_write_timeout(30);
  s.server.set_payload_max_length(o.max_body_bytes);
  s.server.set_tcp_nodelay(true);
  s.setup_routes();
  s.port = s.server.listen_in_background(o.host, o.port, o.listen_backlog, s.listen_thread);
  if (o.health_interval.count() > 0) {
    s.health_thread = std::thread([&s] {
      std::unique_lock lock(s.health_mutex);
      while (!s.health_cv.wait_for(lock, s.options.health_interval, [&] { return s.health_stop; })) {
        lock.unlock();
        s.check_health();
        lock.lock();
      }
    });
  }
  s.started = true;
}

int Router::port() const { return m_impl->port; }

void Router::stop() {
  auto &s = *m_impl;
  const std::lock_guard lock(s.stop_mutex);
  if (!s.started || s.stopped)
    return;
  s.stopped = true;
  s.draining = true;
  {
    const std::lock_guard health(s.health_mutex);
    s.health_stop = true;
  }
  s.health_cv.notify_all();
  if (s.health_thread.joinable())
    s.health_thread.join();
  {
    std::unique_lock flight(s.flight_mutex);
    s.flight_cv.wait_for(flight, s.options.drain_timeout, [&] { return s.in_flight == 0; });
  }
  s.server.stop();
  s.listen_thread.join();
}

void Router::check_health() { m_impl->check_health(); }

std::vector<BackendStatus> Router::backends() const {
  const std::lock_guard lock(m_impl->mutex);
  std::vector<BackendStatus> out;
  for (const auto &s : m_impl->backends)
    out.push_back({s.address.url, s.up, s.requests, s.outstanding_tokens});
  return out;
}

std::string_view Router::policy_name() const { return m_impl->policy->name(); }

std::string Router::metrics_text() const { return m_impl->render_metrics(); }

} // namespace aisp::serving
