// ch17:routing's engine-agnostic core (routed_cluster.hpp).
#include "serving/routed_cluster.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/base/error.hpp"

namespace aisp::serving {

namespace {

// std::mt19937_64 is specified exactly by the standard; the distributions are not, so draws are mapped
// to ranges by hand (the same workload from the same seed on every compiler), as ladder_workload.cpp.
int uniform(std::mt19937_64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

void check_spec(const TenantWorkloadSpec& s) {
  const auto positive = [](const char* name, int v) {
    if (v < 1) throw UsageError(fmt::format("routing workload: {} must be at least 1, not {}", name, v));
  };
  positive("requests", s.requests);
  positive("tenants", s.tenants);
  positive("user_max", s.user_max);
  positive("output_max", s.output_max);
  if (s.system_tokens < 0) throw UsageError("routing workload: system_tokens must not be negative");
  if (s.first_id < 0 || s.vocab <= s.first_id) {
    throw UsageError(fmt::format("routing workload: no token ids in [{}, {})", s.first_id, s.vocab));
  }
}

// The shape alone: per request its tenant, user-message length and max_tokens.
struct Shape {
  int tenant, user, output;
};

std::vector<Shape> workload_shape(const TenantWorkloadSpec& s) {
  std::mt19937_64 rng(s.shape_seed);
  std::vector<Shape> out(static_cast<std::size_t>(s.requests));
  for (Shape& r : out) {
    r.tenant = uniform(rng, 0, s.tenants - 1);
    r.user = uniform(rng, std::max(1, s.user_max / 8), s.user_max);
    r.output = uniform(rng, std::max(1, s.output_max / 8), s.output_max);
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " / ") + p;
  return out;
}

}  // namespace

TenantWorkload make_tenant_workload(const TenantWorkloadSpec& spec, std::uint64_t seed) {
  check_spec(spec);
  std::mt19937_64 content(seed);
  const auto id = [&] { return uniform(content, spec.first_id, spec.vocab - 1); };
  TenantWorkload w;
  w.system.assign(static_cast<std::size_t>(spec.tenants),
                  std::vector<TokenId>(static_cast<std::size_t>(spec.system_tokens)));
  for (auto& s : w.system) {
    for (TokenId& t : s) t = id();
  }
  for (const Shape& r : workload_shape(spec)) {
    Prompt p;
    p.ids = w.system[static_cast<std::size_t>(r.tenant)];
    for (int i = 0; i < r.user; ++i) p.ids.push_back(id());
    p.output_len = r.output;
    w.tenant.push_back(r.tenant);
    w.prompts.push_back(std::move(p));
  }
  return w;
}

double tenant_workload_distinct_tokens(const TenantWorkloadSpec& spec) {
  check_spec(spec);
  double tokens = static_cast<double>(spec.tenants) * spec.system_tokens;
  for (const Shape& r : workload_shape(spec)) tokens += r.user + r.output;
  return tokens;
}

int tenant_workload_longest(const TenantWorkloadSpec& spec) {
  return spec.system_tokens + spec.user_max + spec.output_max;
}

std::uint64_t prompt_hash(std::span<const TokenId> ids) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis
  for (const TokenId t : ids) {
    auto v = static_cast<std::uint32_t>(t);
    for (int b = 0; b < 4; ++b, v >>= 8) {
      h ^= v & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

// --- EngineSlot ---

void EngineSlot::attach(Engine* engine) {
  std::unique_lock lock(m_mutex);
  m_engine = engine;
  const std::lock_guard notes(m_notes_mutex);
  m_prompts.clear();
}

std::vector<std::uint64_t> EngineSlot::submitted_prompts() const {
  const std::lock_guard notes(m_notes_mutex);
  return m_prompts;
}

SubmitResult EngineSlot::submit(GenerationRequest request, TokenSink sink) {
  std::shared_lock lock(m_mutex);
  if (m_engine == nullptr) return {SubmitStatus::draining, -1, "no engine attached (between launches)"};
  const std::uint64_t hash = prompt_hash(request.prompt);
  SubmitResult r = m_engine->submit(std::move(request), std::move(sink));
  if (r.status == SubmitStatus::accepted) {
    const std::lock_guard notes(m_notes_mutex);
    m_prompts.push_back(hash);
  }
  return r;
}

void EngineSlot::cancel(RequestId id) {
  std::shared_lock lock(m_mutex);
  if (m_engine != nullptr) m_engine->cancel(id);
}

EngineStats EngineSlot::stats() const {
  std::shared_lock lock(m_mutex);
  return m_engine != nullptr ? m_engine->stats() : EngineStats{};
}

void EngineSlot::drain() {
  std::shared_lock lock(m_mutex);
  if (m_engine != nullptr) m_engine->drain();
}

// --- StallWatch ---

StallWatch::StallWatch(std::vector<const Engine*> engines, double period_s,
                       std::function<void(const std::string&)> report)
    : m_engines(std::move(engines)), m_period_s(period_s), m_report(std::move(report)) {
  // One entry per engine, in the servers' order (a disaggregated run attaches one engine to both).
  std::vector<const Engine*> distinct;
  for (const Engine* e : m_engines) {
    if (std::find(distinct.begin(), distinct.end(), e) == distinct.end()) distinct.push_back(e);
  }
  m_engines = std::move(distinct);
  if (m_period_s > 0 && !m_engines.empty()) m_thread = std::thread([this] { watch(); });
}

StallWatch::~StallWatch() {
  {
    const std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

int StallWatch::reports() const {
  const std::lock_guard lock(m_mutex);
  return m_reports;
}

int StallWatch::slow_reports() const {
  const std::lock_guard lock(m_mutex);
  return m_slow_reports;
}

std::string StallWatch::state_line() const {
  std::string line;
  for (std::size_t i = 0; i < m_engines.size(); ++i) {
    const EngineStats s = m_engines[i]->stats();
    line += fmt::format(" engine {}: accepted {} finished {} waiting {} running {} steps {} kv blocks {}/{};", i,
                        s.requests_total, s.requests_finished, s.waiting, s.running, s.steps, s.kv_blocks_used,
                        s.kv_blocks_total);
  }
  return line;
}

void StallWatch::watch() {
  const auto signature = [this] {
    std::vector<std::int64_t> sig;
    for (const Engine* e : m_engines) {
      const EngineStats s = e->stats();
      sig.insert(sig.end(), {s.steps, s.requests_total, s.requests_finished, s.generated_tokens});
    }
    return sig;
  };
  const auto steps = [this] {
    std::int64_t n = 0;
    for (const Engine* e : m_engines) n += e->stats().steps;
    return n;
  };
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(m_period_s));
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto started = Clock::now();
  auto last = signature();
  auto since = started;
  auto slow_since = started;  // the last "still serving" line, or the start
  std::int64_t slow_steps = steps();
  std::unique_lock lock(m_mutex);
  while (!m_stop) {
    // Polled a few times a period: a step counter that moves at all resets the clock.
    m_wake.wait_for(lock, period / 8, [this] { return m_stop; });
    if (m_stop) break;
    lock.unlock();
    const auto now_sig = signature();
    const auto now = Clock::now();
    std::string line;
    bool slow = false;
    if (now_sig != last) {
      last = now_sig;
      since = now;
    } else if (now - since >= period) {
      line = fmt::format("routed cluster: nothing moved for {:.0f} s:", seconds(now - since)) + state_line();
      since = now;  // the next line a period later, if still nothing moves
    }
    if (line.empty() && now - since < period && now - slow_since >= k_slow_periods * period) {  // moving, long
      const std::int64_t n = steps();
      line = fmt::format("routed cluster: still serving after {:.0f} s ({} steps in the last {:.0f} s):",
                         seconds(now - started), n - slow_steps, seconds(now - slow_since)) +
             state_line();
      slow = true;
      slow_since = now;
      slow_steps = n;
    }
    if (!line.empty()) m_report(line);
    lock.lock();
    if (!line.empty()) ++(slow ? m_slow_reports : m_reports);
  }
}

// --- RoutedCluster ---

RoutedCluster::RoutedCluster(ClusterOptions options) : m_options(std::move(options)) {
  if (m_options.engines < 1) throw UsageError("routed cluster: at least one engine");
  for (int i = 0; i < m_options.engines; ++i) {
    m_slots.push_back(std::make_unique<EngineSlot>(m_options.model));
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.threads = m_options.threads;
    so.keep_alive_timeout_s = 1;  // the router's upstream connections close after each request anyway
    m_servers.push_back(std::make_unique<HttpServer>(*m_slots.back(), so));
    m_servers.back()->start();
  }
}

RoutedCluster::~RoutedCluster() {
  for (auto& s : m_servers) s->stop();
}

std::vector<std::string> RoutedCluster::backend_urls() const {
  std::vector<std::string> out;
  for (const auto& s : m_servers) out.push_back(fmt::format("http://127.0.0.1:{}", s->port()));
  return out;
}

std::unique_ptr<Router> RoutedCluster::make_router(const std::string& policy, const PrefixPolicyOptions& prefix) const {
  RouterOptions ro;
  ro.backends = backend_urls();
  ro.policy = policy;
  ro.prefix = prefix;
  ro.host = "127.0.0.1";
  ro.port = 0;
  ro.threads = m_options.threads;
  ro.keep_alive_timeout_s = 1;
  ro.health_interval = std::chrono::milliseconds(0);
  auto router = std::make_unique<Router>(std::move(ro));
  router->start();
  return router;
}

ClusterRun RoutedCluster::serve(const Router& router, std::span<Engine* const> engines, const TenantWorkload& workload,
                                const LoadSpec& load) {
  if (engines.size() != m_slots.size()) {
    throw UsageError(fmt::format("routed cluster: {} engines for {} servers", engines.size(), m_slots.size()));
  }
  // Detaches on every way out: an engine must not be reachable once its owner may destroy it.
  struct Attached {
    std::vector<std::unique_ptr<EngineSlot>>& slots;
    ~Attached() {
      for (auto& s : slots) s->attach(nullptr);
    }
  } attached{m_slots};
  for (std::size_t i = 0; i < engines.size(); ++i) m_slots[i]->attach(engines[i]);

  LoadOptions lo;
  lo.url = fmt::format("http://127.0.0.1:{}", router.port());
  lo.model = m_options.model.name;
  lo.rate = load.rate;
  lo.max_concurrency = load.concurrency;
  lo.request_timeout_s = load.request_timeout_s;
  lo.seed = load.seed;
  lo.progress_every_s = 0;
  lo.scrape_metrics = false;  // the router exports no engine counters; the engines' stats are read below
  ClusterRun run;
  {
    // One write(2) per line, not stdio: a line must not wait on stderr's FILE lock, whoever holds it.
    const StallWatch watch({engines.begin(), engines.end()}, m_options.stall_report_s, [](const std::string& line) {
      const std::string text = line + "\n";
      (void)!::write(STDERR_FILENO, text.data(), text.size());
    });
    run.load = run_load(lo, workload.prompts);
  }

  std::unordered_map<std::uint64_t, int> tenant_of;
  for (std::size_t i = 0; i < workload.prompts.size(); ++i) {
    tenant_of.emplace(prompt_hash(workload.prompts[i].ids), workload.tenant[i]);
  }
  for (std::size_t e = 0; e < engines.size(); ++e) {
    EngineShare share;
    share.stats = engines[e]->stats();
    share.tenant_requests.assign(workload.system.size(), 0);
    for (const std::uint64_t h : m_slots[e]->submitted_prompts()) {
      ++share.requests;
      const auto it = tenant_of.find(h);
      if (it != tenant_of.end()) ++share.tenant_requests[static_cast<std::size_t>(it->second)];
    }
    run.engines.push_back(std::move(share));
  }
  return run;
}

std::string check_complete(const ClusterRun& run, const TenantWorkload& workload) {
  if (run.load.records.size() != workload.prompts.size()) {
    return fmt::format("{} records for {} requests", run.load.records.size(), workload.prompts.size());
  }
  for (std::size_t i = 0; i < workload.prompts.size(); ++i) {
    const RequestRecord& r = run.load.records[i];
    const int want = workload.prompts[i].output_len;
    if (!r.success) return fmt::format("request {} failed: {}", i, r.error);
    if (static_cast<int>(r.token_ids.size()) != want || r.output_tokens != want) {
      return fmt::format("request {} got {} ids (usage says {}), not its max_tokens {}", i, r.token_ids.size(),
                         r.output_tokens, want);
    }
  }
  return {};
}

RoutingFacts routing_facts(const ClusterRun& run, const RoutingSlo& slo) {
  RoutingFacts f;
  Slo s;
  s.ttft_ms = slo.ttft_ms;
  s.tpot_ms = slo.tpot_ms;
  f.summary = summarize(run.load.records, run.load.duration_s, s);
  std::size_t tenants = 0;
  for (const EngineShare& e : run.engines) {
    f.requests.push_back(e.requests);
    f.hit_tokens.push_back(e.stats.prefix_cache_hit_tokens);
    f.queried_tokens.push_back(e.stats.prefix_cache_queried_tokens);
    f.evictions.push_back(e.stats.prefix_cache_evictions);
    f.preemptions.push_back(e.stats.preemptions);
    tenants = std::max(tenants, e.tenant_requests.size());
  }
  int engine_tenant_pairs = 0;
  for (std::size_t t = 0; t < tenants; ++t) {
    int served_by = 0;
    for (const EngineShare& e : run.engines) {
      if (t < e.tenant_requests.size() && e.tenant_requests[t] > 0) ++served_by;
    }
    if (served_by > 0) ++f.tenants_seen;
    engine_tenant_pairs += served_by;
  }
  f.engines_per_tenant = f.tenants_seen > 0 ? static_cast<double>(engine_tenant_pairs) / f.tenants_seen : 0;
  return f;
}

std::vector<std::pair<std::string, std::string>> routing_fact_lines(const RoutingFacts& f, const RoutingSlo& slo) {
  const Summary& s = f.summary;
  std::vector<std::string> requests, hit_rates, evictions, preemptions;
  for (std::size_t e = 0; e < f.requests.size(); ++e) {
    requests.push_back(std::to_string(f.requests[e]));
    const double rate = f.queried_tokens[e] > 0
                            ? static_cast<double>(f.hit_tokens[e]) / static_cast<double>(f.queried_tokens[e])
                            : 0.0;
    hit_rates.push_back(fmt::format("{:.3f}", rate));
    evictions.push_back(std::to_string(f.evictions[e]));
    preemptions.push_back(std::to_string(f.preemptions[e]));
  }
  return {{"goodput", fmt::format("{:.1f} req/s ({} of {} within TTFT <= {:g} ms and TPOT <= {:g} ms)",
                                  s.goodput.value_or(0.0), s.good, s.requests, slo.ttft_ms, slo.tpot_ms)},
          {"ttft_ms_p50_p99", fmt::format("{:.1f} / {:.1f}", s.ttft_ms.p50, s.ttft_ms.p99)},
          {"tpot_ms_p50_p99", fmt::format("{:.2f} / {:.2f}", s.tpot_ms.p50, s.tpot_ms.p99)},
          {"requests_per_engine", joined(requests)},
          {"hit_rate_per_engine", joined(hit_rates)},
          {"engines_per_tenant", fmt::format("{:.2f} (mean over {} tenants)", f.engines_per_tenant, f.tenants_seen)},
          {"evictions_per_engine", joined(evictions)},
          {"preemptions_per_engine", joined(preemptions)}};
}

}  // namespace aisp::serving
