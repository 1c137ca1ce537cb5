// ch17:routing: the problem (its axes, over the two-GPU cluster it shares with ch15:disaggregated) and the
// launch every step shares (problem.hpp).
#include "serving/routing_ladder/problem.hpp"

#include <fmt/format.h>

#include "serving/engine_loop.hpp"
#include "serving/ladder_workload.hpp"

namespace aisp::serving::routing_ladder {

namespace {

constexpr const char* k_target = "ch17:routing";

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
RoutingProblem::~RoutingProblem() = default;

void RoutingProblem::allocate(const AxisValues& axes, const DeviceFacts& device) {
  const auto narrow = [&](const char* name, std::int64_t most) { return gpu::narrow_axis(axes, k_target, name, most); };
  gpu::TwoGpuClusterSpec spec{.target = k_target, .preset = ladder_model_preset(axes.at("model"), k_target)};
  spec.workload.requests = narrow("requests", 1 << 16);
  spec.workload.tenants = narrow("tenants", 1 << 16);
  spec.workload.system_tokens = narrow("system", 1 << 20);
  spec.workload.user_max = narrow("user", 1 << 20);
  spec.workload.output_max = narrow("output", 1 << 20);
  spec.kv_blocks = narrow("kv_blocks", 1 << 24);
  spec.token_budget = narrow("token_budget", 1 << 20);
  m_max_running = narrow("max_running", 4096);
  spec.max_running = m_max_running;
  m_load = gpu::load_from_axes(axes, k_target);
  spec.concurrency = m_load.concurrency;
  m_prefix.prefix_tokens = gpu::TwoGpuCluster::k_block_size;
  m_prefix.load_bound_tokens = axes.at("load_bound");
  m_slo = gpu::slo_from_axes(axes, k_target);
  m_gpus.reset();  // one model on the GPUs at a time
  m_gpus = std::make_unique<gpu::TwoGpuCluster>(std::move(spec), device);
}

void RoutingProblem::generate(std::uint64_t seed, cudaStream_t stream) { m_gpus->generate(seed, stream); }
std::vector<TensorView> RoutingProblem::inputs() const { return m_gpus->inputs(); }
std::vector<TensorView> RoutingProblem::outputs() const { return m_gpus->outputs(); }
Work RoutingProblem::work() const { return m_gpus->work(); }
std::string RoutingProblem::judge_outputs(cudaStream_t stream) { return m_gpus->judge(stream); }

Args RoutingProblem::args() const {
  return {.gpus = m_gpus.get(), .max_running = m_max_running, .load = m_load, .slo = m_slo, .prefix = m_prefix};
}

RoutingFacts serve_routed(const Args& a, const Router& router, cudaStream_t stream) {
  SchedulerConfig config = a.gpus->engine_config(a.max_running);
  config.prefix_cache = true;
  ClusterRun run;
  {
    EngineLoop first(a.gpus->runner(0), config, k_target);  // fresh every launch: empty prefix caches
    EngineLoop second(a.gpus->runner(1), config, k_target);
    const std::vector<Engine*> engines = {&first, &second};
    run = a.gpus->servers().serve(router, engines, a.gpus->workload(), a.load);
  }  // the engines are gone before the outputs are stored: the judge uses a runner's KV blocks as scratch
  a.gpus->store_outputs(run, router.policy_name(), stream);
  return routing_facts(run, a.slo);
}

std::vector<Fact> step_facts(const RoutingFacts& f, const Args& a) {
  std::vector<Fact> facts;
  for (auto& [name, value] : routing_fact_lines(f, a.slo)) facts.push_back({std::move(name), std::move(value)});
  return facts;
}

void RoutedStep::setup(const Args& a, cudaStream_t stream) {
  m_router = a.gpus->servers().make_router(m_policy, a.prefix);
  launch(a, stream);  // captures the decode graphs of the shapes it meets
}

}  // namespace aisp::serving::routing_ladder
