// ch17:routing: the problem (two runners, the cluster, the workload, the judge) and the launch every step
// shares (problem.hpp).
#include "serving/routing_ladder/problem.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/engine_loop.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/ladder_workload.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving::routing_ladder {

namespace {

constexpr int k_block_size = 16;
constexpr const char* k_target = "ch17:routing";
// The arrival times' seed: fixed, so that every step and every seed of a run see the same schedule.
constexpr std::uint64_t k_arrival_seed = 1;

// Makes `device` current for a scope and restores the caller's: the harness's thread must stay on the
// harness's device, and a LlamaRunner makes its own device current in every call it serves.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    AISP_CUDA_CHECK(cudaGetDevice(&m_saved));
    AISP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() { (void)cudaSetDevice(m_saved); }  // no throw from a destructor
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int m_saved = 0;
};

}  // namespace

TargetInfo RoutingProblem::target_info() {
  return {.chapter = "ch17",
          .ladder = "routing",
          .summary = "two engines (one per GPU) behind the router, prefix caching on: round robin -> least "
                     "outstanding tokens -> prefix locality (wall clock, makespan; goodput under an SLO)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0},
                   {.name = "requests", .default_value = 384, .help = "requests in the workload", .test_value = 12},
                   {.name = "tenants", .default_value = 16,
                    .help = "applications, each with its own system prompt; requests pick one uniformly",
                    .test_value = 3},
                   {.name = "system", .default_value = 1024, .help = "tokens of each tenant's system prompt",
                    .min_value = 0, .test_value = 48},
                   {.name = "user", .default_value = 256,
                    .help = "longest user message (tokens); lengths uniform in [user/8, user]", .test_value = 16},
                   {.name = "output", .default_value = 128,
                    .help = "longest output (tokens); uniform in [output/8, output], all generated", .test_value = 8},
                   {.name = "rate", .default_value = 400,
                    .help = "Poisson arrivals per second (0: all at once); the default saturates one engine",
                    .min_value = 0, .test_value = 1000},
                   {.name = "concurrency", .default_value = 96,
                    .help = "requests in flight at most (the client queues the rest; 0: no cap)", .min_value = 0,
                    .test_value = 4},
                   {.name = "kv_blocks", .default_value = 1280,
                    .help = "KV-cache blocks of 16 tokens per engine: holds about half the tenants' system "
                            "prompts beside the running requests, not all of them",
                    .test_value = 64},
                   {.name = "max_running", .default_value = 32, .help = "sequences per batch, per engine",
                    .test_value = 4},
                   {.name = "token_budget", .default_value = 4096,
                    .help = "tokens per engine step (prefill chunks and decodes together)", .test_value = 64},
                   {.name = "load_bound", .default_value = 4096,
                    .help = "prefix locality: tokens a prefix's engine may have outstanding above the "
                            "least-loaded one's before its requests spill (aisp route --prefix-load-bound)",
                    .min_value = 0},
                   {.name = "ttft_slo_ms", .default_value = 300, .help = "goodput: time to first token at most"},
                   {.name = "tpot_slo_ms", .default_value = 30, .help = "goodput: time per output token at most"}},
          .clock = ClockKind::wall,
          .default_mode = CacheMode::hot};
}

RoutingProblem::RoutingProblem() = default;

RoutingProblem::~RoutingProblem() {
  m_cluster.reset();
  if (m_runners.size() > 1) {
    // The peer runner's handles and graphs belong to the peer's context: released with it current, and
    // the caller's device restored. No throwing here (CurrentDevice's checks throw).
    int saved = 0;
    const bool switched = cudaGetDevice(&saved) == cudaSuccess && cudaSetDevice(m_peer) == cudaSuccess;
    m_runners[1].reset();
    if (switched) (void)cudaSetDevice(saved);
  }
}

void RoutingProblem::allocate(const AxisValues& axes, const DeviceFacts& device) {
  const std::string preset = ladder_model_preset(axes.at("model"), k_target);
  const auto narrow = [&](const char* name, std::int64_t most) {
    const std::int64_t v = axes.at(name);
    if (v > most) throw UsageError(fmt::format("{}: {}={} is too large (at most {})", k_target, name, v, most));
    return static_cast<int>(v);
  };
  m_spec.requests = narrow("requests", 1 << 16);
  m_spec.tenants = narrow("tenants", 1 << 16);
  m_spec.system_tokens = narrow("system", 1 << 20);
  m_spec.user_max = narrow("user", 1 << 20);
  m_spec.output_max = narrow("output", 1 << 20);
  m_max_running = narrow("max_running", 4096);
  m_token_budget = narrow("token_budget", 1 << 20);
  const int kv_blocks = narrow("kv_blocks", 1 << 24);
  m_load = {.rate = static_cast<double>(narrow("rate", 1 << 20)),
            .concurrency = narrow("concurrency", 1 << 16),
            .seed = k_arrival_seed};
  m_prefix.prefix_tokens = k_block_size;
  m_prefix.load_bound_tokens = axes.at("load_bound");
  m_slo = {.ttft_ms = static_cast<double>(narrow("ttft_slo_ms", 1 << 30)),
           .tpot_ms = static_cast<double>(narrow("tpot_slo_ms", 1 << 30))};
  const int longest = tenant_workload_longest(m_spec);
  const int blocks_per_request = (longest + k_block_size - 1) / k_block_size;
  if (kv_blocks < blocks_per_request) {
    throw UsageError(fmt::format("{}: kv_blocks={} cannot hold one request of {} tokens ({} blocks)", k_target,
                                 kv_blocks, longest, blocks_per_request));
  }
  m_device = device.index;
  m_peer = device.device_count >= 2 ? (device.index + 1) % device.device_count : device.index;
  m_tokens = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_spec.requests) * m_spec.output_max);
  m_inputs = DeviceBuffer<std::int32_t>(1);
  // On one GPU every step is SKIPPED before it runs: load nothing.
  if (device.device_count < 2) return;

  const ModelWeights weights = ModelWeights::open(cached_ladder_model(preset, k_target));
  RunnerOptions opt;
  opt.block_size = k_block_size;
  opt.num_kv_blocks = kv_blocks;
  opt.max_batched_tokens = m_token_budget;
  opt.max_context = longest;
  opt.cuda_graphs = true;  // ch16:serving's fastest engine, in every step
  m_runners.push_back(std::make_unique<LlamaRunner>(weights, opt));
  {
    CurrentDevice on(m_peer);
    m_runners.push_back(std::make_unique<LlamaRunner>(weights, opt));
  }
  const LlamaRunner& r = *m_runners.front();
  const ModelConfig& cfg = r.config();
  m_spec.vocab = cfg.vocab_size;
  m_spec.first_id = std::min(cfg.vocab_size - 1, 3);  // past the usual special ids of small vocabularies
  m_params = static_cast<double>(weight_bytes(cfg)) / 2.0;  // bf16
  m_distinct_tokens = tenant_workload_distinct_tokens(m_spec);

  ClusterOptions co;
  co.engines = 2;
  co.model = {.name = k_target, .vocab_size = r.vocab_size(), .max_context = r.max_context(), .eos_token_id = -1};
  co.threads = std::max(m_load.concurrency > 0 ? m_load.concurrency : m_spec.requests, 1) + 8;
  m_cluster = std::make_unique<RoutedCluster>(co);

  std::size_t input_tokens = 0;
  for (const Prompt& p : make_tenant_workload(m_spec, 0).prompts) input_tokens += p.ids.size();
  m_inputs = DeviceBuffer<std::int32_t>(std::max<std::size_t>(input_tokens, 1));
}

void RoutingProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  if (m_runners.empty()) return;  // one GPU: nothing runs (allocate)
  m_workload = make_tenant_workload(m_spec, seed);
  std::vector<std::int32_t> flat;
  flat.reserve(m_inputs.size());
  for (const Prompt& p : m_workload.prompts) flat.insert(flat.end(), p.ids.begin(), p.ids.end());
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_inputs.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> RoutingProblem::inputs() const {
  return {{"prompts", m_inputs.data(), m_inputs.size(), DType::i32}};
}

std::vector<TensorView> RoutingProblem::outputs() const {
  return {{"outputs", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work RoutingProblem::work() const { return {.flops = 2.0 * m_params * m_distinct_tokens, .flop_dtype = "bf16"}; }

Args RoutingProblem::args() const {
  return {.runners = &m_runners,
          .cluster = m_cluster.get(),
          .workload = &m_workload,
          .tokens = m_tokens.data(),
          .max_output = m_spec.output_max,
          .max_running = m_max_running,
          .token_budget = m_token_budget,
          .load = m_load,
          .slo = m_slo,
          .prefix = m_prefix};
}

std::string RoutingProblem::judge_outputs(cudaStream_t stream) {
  std::vector<std::int32_t> got(m_tokens.size());
  AISP_CUDA_CHECK(cudaMemcpyAsync(got.data(), m_tokens.data(), got.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (m_runners.empty()) return "no runners (one GPU)";
  const int vocab = m_spec.vocab;
  JudgeTally tally;
  for (std::size_t i = 0; i < m_workload.prompts.size(); ++i) {
    const Prompt& p = m_workload.prompts[i];
    const std::int32_t* row = got.data() + i * static_cast<std::size_t>(m_spec.output_max);
    for (int j = 0; j < m_spec.output_max; ++j) {
      const bool token = row[j] >= 0 && row[j] < vocab;
      if (j < p.output_len && !token) return fmt::format("request {}: output token {} is {}", i, j, row[j]);
      if (j >= p.output_len && row[j] != -1) return fmt::format("request {}: more than {} tokens", i, p.output_len);
    }
    // This device's runner judges both engines' outputs: the same weights, and its KV blocks are free
    // (the launch's engines are gone).
    const std::string why = gpu::judge_generation(*m_runners.front(), p.ids,
                                                  {row, static_cast<std::size_t>(p.output_len)},
                                                  static_cast<int>(i), tally);
    if (!why.empty()) return why;
  }
  return judge_totals(tally);
}

RoutingFacts serve_routed(const Args& a, const Router& router, cudaStream_t stream) {
  SchedulerConfig config;
  config.max_running = a.max_running;
  config.max_batched_tokens = a.token_budget;
  config.block_size = k_block_size;
  config.max_waiting = static_cast<int>(a.workload->prompts.size()) + 1;  // none is refused
  config.prefix_cache = true;
  std::vector<std::unique_ptr<EngineLoop>> loops;
  std::vector<Engine*> engines;
  for (const auto& runner : *a.runners) {
    loops.push_back(std::make_unique<EngineLoop>(*runner, config, k_target));  // fresh: empty caches
    engines.push_back(loops.back().get());
  }
  const ClusterRun run = a.cluster->serve(router, engines, *a.workload, a.load);
  loops.clear();  // the judge uses a runner's KV blocks as scratch: no engine may own them then
  if (const std::string why = check_complete(run, *a.workload); !why.empty()) {
    throw std::runtime_error(fmt::format("{} ({}): {}", k_target, router.policy_name(), why));
  }
  const std::size_t n = a.workload->prompts.size();
  std::vector<std::int32_t> flat(n * static_cast<std::size_t>(a.max_output), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& ids = run.load.records[i].token_ids;
    std::copy_n(ids.begin(), std::min<std::size_t>(ids.size(), a.max_output),
                flat.begin() + static_cast<std::ptrdiff_t>(i * a.max_output));
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.tokens, flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
  return routing_facts(run, a.slo);
}

std::vector<Fact> step_facts(const RoutingFacts& f, const Args& a) {
  std::vector<Fact> facts;
  for (auto& [name, value] : routing_fact_lines(f, a.slo)) facts.push_back({std::move(name), std::move(value)});
  return facts;
}

void RoutedStep::setup(const Args& a, cudaStream_t stream) {
  m_router = a.cluster->make_router(m_policy, a.prefix);
  launch(a, stream);  // captures the decode graphs of the shapes it meets
  launch(a, stream);  // the facts: a launch like the timed ones
}

}  // namespace aisp::serving::routing_ladder
