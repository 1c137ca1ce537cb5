// The engine-agnostic core of ch17:routing (serving/routing_ladder/): a multi-tenant workload, a
// loopback cluster of engines behind HTTP servers with a Router in front (serving/router.hpp), the
// load driven through the router by the load generator's client (run_load), and the facts a step
// reports. Host-only (no CUDA), so that tests/cpu/serving/test_routing_ladder.cpp runs all of it with
// FakeRunner-backed engines; the ladder attaches EngineLoops over one LlamaRunner per GPU.
//
// Why engines are attached per launch rather than owned: every launch must start with empty prefix
// caches (a cache warm from the previous launch would make every prompt a hit), so the ladder builds
// fresh EngineLoops for each launch, while the servers and the router, whose start-up (thread pools,
// sockets) is no part of what a policy costs, live across launches. An EngineSlot is the Engine a
// server holds: it forwards to the engine attached for the current launch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serving/engine_api.hpp"
#include "serving/http_server.hpp"
#include "serving/loadgen.hpp"
#include "serving/route_policy.hpp"
#include "serving/router.hpp"

namespace aisp::serving {

// --- the workload ---

// `tenants` applications, each with its own system prompt of `system_tokens` ids; every request is one
// tenant's system prompt followed by a user message, and generates max_tokens ids (ignore_eos). The
// shape (which tenant each request belongs to, message and output lengths) comes from shape_seed, the
// ids from the run's seed: every seed serves the same tokens, so the declared work is exact for all.
struct TenantWorkloadSpec {
  int requests = 384;
  int tenants = 16;
  int system_tokens = 1024;
  int user_max = 256;    // user messages uniform in [max(1, user_max / 8), user_max] tokens
  int output_max = 128;  // max_tokens uniform in [max(1, output_max / 8), output_max]
  int vocab = 0;         // ids uniform in [first_id, vocab)
  int first_id = 0;
  std::uint64_t shape_seed = 1;
};

struct TenantWorkload {
  std::vector<std::vector<TokenId>> system;  // per tenant
  std::vector<int> tenant;                   // per request
  std::vector<Prompt> prompts;  // per request: system[tenant] + user message; output_len = max_tokens
};

// A pure function of (spec, seed). Throws aisp::UsageError for a size below 1 (system_tokens may be 0)
// or a vocabulary without ids at or above first_id.
[[nodiscard]] TenantWorkload make_tenant_workload(const TenantWorkloadSpec& spec, std::uint64_t seed);
// Tokens any engine must compute at least: each system prompt once, every user message and output
// once. The same for every seed.
[[nodiscard]] double tenant_workload_distinct_tokens(const TenantWorkloadSpec& spec);
// The longest request: system + user_max + output_max (the engines' max_context).
[[nodiscard]] int tenant_workload_longest(const TenantWorkloadSpec& spec);
// FNV-1a over the ids: how the cluster tells which prompt an engine was given.
[[nodiscard]] std::uint64_t prompt_hash(std::span<const TokenId> ids);

// --- the cluster ---

// The Engine an HttpServer of the cluster holds: forwards to the engine attached for this launch, and
// notes the hash of every prompt submitted to it (which request each engine served). Unattached, it
// refuses submissions (draining) and reports empty stats.
class EngineSlot final : public Engine {
 public:
  explicit EngineSlot(ModelInfo info) : m_info(std::move(info)) {}
  // Attaches `engine` (nullptr: detaches) and clears the notes. Waits for forwarded calls in progress,
  // so that the engine detached may be destroyed once this returns.
  void attach(Engine* engine);
  [[nodiscard]] std::vector<std::uint64_t> submitted_prompts() const;

  [[nodiscard]] ModelInfo info() const override { return m_info; }
  SubmitResult submit(GenerationRequest request, TokenSink sink) override;
  void cancel(RequestId id) override;
  [[nodiscard]] EngineStats stats() const override;
  void drain() override;

 private:
  ModelInfo m_info;
  mutable std::shared_mutex m_mutex;  // shared: a forwarded call; exclusive: attach
  Engine* m_engine = nullptr;
  mutable std::mutex m_notes_mutex;      // submits from several connection threads append at once
  std::vector<std::uint64_t> m_prompts;  // hashes of the prompts submitted since attach
};

struct ClusterOptions {
  int engines = 2;
  double stall_report_s = 10;  // StallWatch's period during serve() (0: no watch)
  ModelInfo model;   // what every server announces; each engine attached must serve it
  int threads = 64;  // connections each server, and the router, serve at once: at least the load's
                     // concurrency, or requests queue for a connection thread rather than an engine
};

struct LoadSpec {
  double rate = 0;         // Poisson arrivals per second; <= 0: all at once
  int concurrency = 0;     // at most this many requests in flight; 0: no cap
  std::uint64_t seed = 1;  // of the arrival times (fixed by the ladder: every step sees the same ones)
  int request_timeout_s = 600;
};

// One engine's share of a launch.
struct EngineShare {
  std::int64_t requests = 0;
  std::vector<int> tenant_requests;  // per tenant
  EngineStats stats;                 // its own counters (prefix-cache hits, preemptions) after the run
};

struct ClusterRun {
  LoadResult load;  // records in the workload's order, token ids included
  std::vector<EngineShare> engines;
};

// While a load runs: when no engine has moved (steps, requests accepted or finished, tokens) for
// `period_s`, writes one line per engine's state to `report` (stderr in serve()), again every period
// while it stays still. A launch that hangs then says where before whoever waits on it gives up (the
// harness kills a worker silent for 120 s): engines idle with requests unfinished at the client point at
// the HTTP path, requests running with no step at an engine. It reads only Engine::stats(), which every
// engine allows from any thread. (First seen: one timed launch of ch15:disaggregated:01_colocated that
// never returned, on nvidia-h200-x2, 2026-11-28.) A load that keeps moving but has run for
// k_slow_periods periods gets a "still serving" line with the same state and the steps taken since the
// last line, again every k_slow_periods periods. (The launches that seemed to hang were healthy ones, 256
// to a timed sample by a harness fault since fixed, each shorter than k_slow_periods: nothing to report.)
class StallWatch {
 public:
  StallWatch(std::vector<const Engine*> engines, double period_s, std::function<void(const std::string&)> report);
  ~StallWatch();  // stops and joins the watching thread
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;
  [[nodiscard]] int reports() const;       // "nothing moved" lines
  [[nodiscard]] int slow_reports() const;  // "still serving" lines
  // 20 s at serve()'s 10 s period: the ladders' loads last seconds, and the harness gives up on a worker
  // silent for 120 s, so a slow launch says so several times before that.
  static constexpr int k_slow_periods = 2;

 private:
  void watch();
  std::string state_line() const;  // every engine's counters
  std::vector<const Engine*> m_engines;  // distinct engines (both slots of a disaggregated run hold one)
  double m_period_s;
  std::function<void(const std::string&)> m_report;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  int m_reports = 0;
  int m_slow_reports = 0;
  std::thread m_thread;  // last: started once the members above exist
};

// One HttpServer per EngineSlot on 127.0.0.1 at any free port, started at construction (loopback only:
// the API has no authentication), and the routers in front of them.
class RoutedCluster {
 public:
  explicit RoutedCluster(ClusterOptions options);
  ~RoutedCluster();
  RoutedCluster(const RoutedCluster&) = delete;
  RoutedCluster& operator=(const RoutedCluster&) = delete;

  [[nodiscard]] std::vector<std::string> backend_urls() const;
  [[nodiscard]] const ClusterOptions& options() const { return m_options; }
  // A router over every server with `policy` ("round-robin", "least-tokens", "prefix"), started on
  // 127.0.0.1 at any free port. It checks the backends once at start and never again (nothing takes a
  // server down during a launch, and a checker's requests would be load the steps do not share).
  [[nodiscard]] std::unique_ptr<Router> make_router(const std::string& policy,
                                                    const PrefixPolicyOptions& prefix = {}) const;
  // Attaches `engines` (one per server, in order), sends the workload through `router` with run_load,
  // reads each engine's counters and which prompts it was given, and detaches them again.
  [[nodiscard]] ClusterRun serve(const Router& router, std::span<Engine* const> engines,
                                 const TenantWorkload& workload, const LoadSpec& load);

 private:
  ClusterOptions m_options;
  std::vector<std::unique_ptr<EngineSlot>> m_slots;
  std::vector<std::unique_ptr<HttpServer>> m_servers;  // after the slots: destroyed before them
};

// "" when every request completed with exactly its max_tokens ids, else the first that did not.
[[nodiscard]] std::string check_complete(const ClusterRun& run, const TenantWorkload& workload);

// --- the facts ---

struct RoutingSlo {
  double ttft_ms = 0;
  double tpot_ms = 0;
};

struct RoutingFacts {
  Summary summary;  // over the records: goodput within both SLOs, TTFT and TPOT distributions
  std::vector<std::int64_t> requests;            // per engine
  std::vector<std::int64_t> hit_tokens, queried_tokens, evictions, preemptions;  // per engine
  int tenants_seen = 0;            // tenants with at least one request
  double engines_per_tenant = 0;   // mean over them of the engines that served the tenant
};

[[nodiscard]] RoutingFacts routing_facts(const ClusterRun& run, const RoutingSlo& slo);
// (name, value) pairs as a step reports them (device/ladder.hpp's Fact, which this layer cannot
// include without CUDA's headers).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> routing_fact_lines(const RoutingFacts& facts,
                                                                                  const RoutingSlo& slo);

}  // namespace aisp::serving
