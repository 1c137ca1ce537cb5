// `aisp route`: an OpenAI-compatible router in front of several `aisp serve` processes. Logic lives
// in serving/router.* and serving/route_policy.*; docs/routing.md.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <unistd.h>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "serving/router.hpp"

namespace aisp::cli {

namespace {

struct RouteCli {
  std::vector<std::string> backends;
  std::string policy = "round-robin";
  std::string host = "127.0.0.1";
  int port = 8100;
  int threads = 512;
  int keep_alive_timeout_s = 5;
  int prefix_tokens = 16;
  std::int64_t prefix_load_bound = 4096;
  std::size_t prefix_entries = 65536;
  int health_interval_ms = 1000;
};

// As `aisp serve` (cli/cmd_serve.cpp): the handler only writes a byte to a pipe; the main thread
// stops the router. A second signal exits at once.
int g_route_signal_pipe[2] = {-1, -1};
volatile std::sig_atomic_t g_route_signals = 0;

extern "C" void on_route_stop_signal(int sig) {
  if (g_route_signals != 0)
    _exit(128 + sig);
  g_route_signals = 1;
  const char c = static_cast<char>(sig);
  [[maybe_unused]] const auto n = ::write(g_route_signal_pipe[1], &c, 1);
}

int route(const RouteCli &c) {
  serving::RouterOptions o;
  o.backends = c.backends;
  o.policy = c.policy;
  o.prefix.prefix_tokens = c.prefix_tokens;
  o.prefix.load_bound_tokens = c.prefix_load_bound;
  o.prefix.max_entries = c.prefix_entries;
  o.host = c.host;
  o.port = c.port;
  o.threads = c.threads;
  o.keep_alive_timeout_s = c.keep_alive_timeout_s;
  o.health_interval = std::chrono::milliseconds(c.health_interval_ms);
  o.log = [](const std::string &line) { std::fprintf(stderr, "aisp route: %s\n", line.c_str()); };
  serving::Router router(o); // validates everything before anything listens

  if (::pipe(g_route_signal_pipe) != 0)
    throw std::runtime_error("pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_route_stop_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  router.start();
  std::string up;
  int n_up = 0;
  for (const auto &b : router.backends()) {
    up += fmt::format(" {}{}", b.url, b.up ? "" : " (down)");
    n_up += b.up ? 1 : 0;
  }
  std::fprintf(stderr,
               "aisp route: http://%s:%d  policy %s, %d of %zu backends up:%s; SIGINT/SIGTERM "
               "drains and stops\n",
               c.host.c_str(), router.port(), std::string(router.policy_name()).c_str(), n_up,
               c.backends.size(), up.c_str());
  char sig = 0;
  while (::read(g_route_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  std::fprintf(stderr, "aisp route: signal %d: relaying in-flight requests to their end (again to "
                       "quit now)\n",
               sig);
  router.stop();
  std::fprintf(stderr, "aisp route: stopped\n");
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ::close(g_route_signal_pipe[0]);
  ::close(g_route_signal_pipe[1]);
  return 0;
}

} // namespace

void add_route_command(CLI::App &app, Context &ctx) {
  auto r = std::make_shared<RouteCli>();
  auto *cmd = app.add_subcommand(
      "route", "OpenAI-compatible router in front of several `aisp serve` backends "
               "(round-robin, least outstanding tokens, prefix locality); docs/routing.md");
  cmd->add_option("--backend", r->backends,
                  "backend URL http://HOST:PORT (repeat the option for each backend)");
  cmd->add_option("--policy", r->policy, "round-robin, least-tokens or prefix")
      ->capture_default_str();
  cmd->add_option("--host", r->host, "address to listen on (loopback unless told: no authentication)")
      ->capture_default_str();
  cmd->add_option("--port", r->port, "TCP port (0: any free one)")->capture_default_str();
  cmd->add_option("--threads", r->threads, "connection threads = client connections served at once")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--keep-alive-timeout", r->keep_alive_timeout_s,
                  "seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--prefix-tokens", r->prefix_tokens,
                  "prefix policy: leading prompt tokens hashed (one KV block)")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--prefix-load-bound", r->prefix_load_bound,
                  "prefix policy: keep a prefix on its backend while its outstanding tokens are at "
                  "most this many above the least-loaded backend's")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--prefix-entries", r->prefix_entries,
                  "prefix policy: prefixes remembered (least recently used dropped)")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--health-interval-ms", r->health_interval_ms,
                  "GET /health on every backend this often (0: only at start)")
      ->capture_default_str()
      ->check(non_negative());
  cmd->callback([r, &ctx] { ctx.exit_code = route(*r); });
}

} // namespace aisp::cli
