// ch15:disaggregated: the problem (its axes, over the two-GPU cluster it shares with ch17:routing) and the
// launch both steps share (problem.hpp).
#include "serving/disaggregated_ladder/problem.hpp"

#include <fmt/format.h>

#include "serving/disaggregated.hpp"
#include "serving/engine_loop.hpp"
#include "serving/ladder_workload.hpp"

namespace aisp::serving::disaggregated_ladder {

namespace {

constexpr const char* k_target = "ch15:disaggregated";

}  // namespace

TargetInfo DisaggregatedProblem::target_info() {
  return {.chapter = "ch15",
          .ladder = "disaggregated",
          .summary = "two GPUs, the same Poisson workload: two colocated engines -> prefill on one GPU, decode "
                     "on the other with the KV blocks moved between them (wall clock, makespan; goodput under "
                     "an SLO)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0},
                   {.name = "requests", .default_value = 96, .help = "requests in the workload", .test_value = 12},
                   {.name = "input", .default_value = 2048,
                    .help = "longest prompt (tokens); lengths uniform in [input/8, input]", .test_value = 48},
                   {.name = "output", .default_value = 256,
                    .help = "longest output (tokens); uniform in [output/8, output], all generated", .test_value = 8},
                   {.name = "rate", .default_value = 32,
                    .help = "Poisson arrivals per second (0: all at once)", .min_value = 0, .test_value = 1000},
                   {.name = "concurrency", .default_value = 128,
                    .help = "requests in flight at most (the client queues the rest; 0: no cap)", .min_value = 0,
                    .test_value = 4},
                   {.name = "kv_blocks", .default_value = 4096, .help = "KV-cache blocks of 16 tokens per GPU",
                    .test_value = 64},
                   {.name = "max_running", .default_value = 64, .help = "sequences per batch, per engine",
                    .test_value = 4},
                   {.name = "token_budget", .default_value = 4096,
                    .help = "tokens per engine step (prefill chunks and decodes together)", .test_value = 64},
                   {.name = "ttft_slo_ms", .default_value = 1000, .help = "goodput: time to first token at most"},
                   {.name = "tpot_slo_ms", .default_value = 30, .help = "goodput: time per output token at most"}},
          .clock = ClockKind::wall,
          .default_mode = CacheMode::hot};
}

DisaggregatedProblem::DisaggregatedProblem() = default;
DisaggregatedProblem::~DisaggregatedProblem() = default;

void DisaggregatedProblem::allocate(const AxisValues& axes, const DeviceFacts& device) {
  const auto narrow = [&](const char* name, std::int64_t most) { return gpu::narrow_axis(axes, k_target, name, most); };
  gpu::TwoGpuClusterSpec spec{.target = k_target, .preset = ladder_model_preset(axes.at("model"), k_target)};
  spec.workload.requests = narrow("requests", 1 << 16);
  spec.workload.tenants = 1;  // one application, no shared system prompt: prefix caching stays off
  spec.workload.system_tokens = 0;
  spec.workload.user_max = narrow("input", 1 << 20);
  spec.workload.output_max = narrow("output", 1 << 20);
  spec.kv_blocks = narrow("kv_blocks", 1 << 24);
  spec.token_budget = narrow("token_budget", 1 << 20);
  m_max_running = narrow("max_running", 4096);
  spec.max_running = m_max_running;
  m_load = gpu::load_from_axes(axes, k_target);
  spec.concurrency = m_load.concurrency;
  m_slo = gpu::slo_from_axes(axes, k_target);
  m_gpus.reset();  // one model on the GPUs at a time
  m_gpus = std::make_unique<gpu::TwoGpuCluster>(std::move(spec), device);
}

void DisaggregatedProblem::generate(std::uint64_t seed, cudaStream_t stream) { m_gpus->generate(seed, stream); }
std::vector<TensorView> DisaggregatedProblem::inputs() const { return m_gpus->inputs(); }
std::vector<TensorView> DisaggregatedProblem::outputs() const { return m_gpus->outputs(); }
Work DisaggregatedProblem::work() const { return m_gpus->work(); }
std::string DisaggregatedProblem::judge_outputs(cudaStream_t stream) { return m_gpus->judge(stream); }

Args DisaggregatedProblem::args() const {
  return {.gpus = m_gpus.get(), .max_running = m_max_running, .load = m_load, .slo = m_slo};
}

LayoutFacts serve_layout(const Args& a, const Router& router, Layout layout, cudaStream_t stream) {
  const SchedulerConfig config = a.gpus->engine_config(a.max_running);
  LlamaRunner& here = a.gpus->runner(0);
  LlamaRunner& next = a.gpus->runner(1);
  LayoutFacts facts;
  const auto captured = [&] { return here.graph_stats().captured + next.graph_stats().captured; };
  const int captured_before = captured();
  ClusterRun run;
  if (layout == Layout::colocated) {
    // Fresh engines every launch, as every step of ch17:routing: nothing carries over.
    std::vector<std::unique_ptr<EngineLoop>> loops;
    loops.push_back(std::make_unique<EngineLoop>(here, config, k_target));
    loops.push_back(std::make_unique<EngineLoop>(next, config, k_target));
    const std::vector<Engine*> engines = {loops[0].get(), loops[1].get()};
    run = a.gpus->servers().serve(router, engines, a.gpus->workload(), a.load);
    for (int g = 0; g < 2; ++g) {
      facts.steps[g] = run.engines[static_cast<std::size_t>(g)].stats.steps;
      facts.preemptions[g] = run.engines[static_cast<std::size_t>(g)].stats.preemptions;
      facts.requests[g] = run.engines[static_cast<std::size_t>(g)].requests;
    }
    loops.clear();  // the judge uses a runner's KV blocks as scratch: no engine may own them then
  } else {
    // Both servers hold the one engine: the router and the servers cost what they cost in step 01.
    RunnerKvMover mover(here, next);
    auto engine = std::make_unique<DisaggregatedEngine>(here, next, mover, config, config, k_target);
    const std::vector<Engine*> engines = {engine.get(), engine.get()};
    run = a.gpus->servers().serve(router, engines, a.gpus->workload(), a.load);
    const EngineStats p = engine->prefill_engine().stats();
    const EngineStats d = engine->decode_engine().stats();
    facts.steps[0] = p.steps;
    facts.steps[1] = d.steps;
    facts.preemptions[0] = p.preemptions;
    facts.preemptions[1] = d.preemptions;
    facts.requests[0] = p.requests_total;
    facts.requests[1] = d.requests_total;
    facts.handoffs = engine->handoffs();
    engine.reset();
  }
  facts.graphs_captured = captured() - captured_before;
  a.gpus->store_outputs(run, layout == Layout::colocated ? "colocated" : "disaggregated", stream);
  facts.routing = routing_facts(run, a.slo);
  return facts;
}

std::vector<Fact> step_facts(const LayoutFacts& f, const Args& a, Layout layout) {
  const Summary& s = f.routing.summary;
  const auto pair = [](std::int64_t x, std::int64_t y) { return fmt::format("{} / {}", x, y); };
  std::vector<Fact> facts = {
      {"goodput", fmt::format("{:.2f} req/s ({} of {} within TTFT <= {:g} ms and TPOT <= {:g} ms)",
                              s.goodput.value_or(0.0), s.good, s.requests, a.slo.ttft_ms, a.slo.tpot_ms)},
      {"ttft_ms_p50_p99", fmt::format("{:.1f} / {:.1f}", s.ttft_ms.p50, s.ttft_ms.p99)},
      {"tpot_ms_p50_p99", fmt::format("{:.2f} / {:.2f}", s.tpot_ms.p50, s.tpot_ms.p99)},
      {"steps_per_gpu", pair(f.steps[0], f.steps[1])},
      {"preemptions_per_gpu", pair(f.preemptions[0], f.preemptions[1])}};
  if (layout == Layout::colocated) {
    facts.push_back({"requests_per_gpu", pair(f.requests[0], f.requests[1])});
  } else {
    facts.push_back({"prefilled_decoded", pair(f.requests[0], f.requests[1])});
    facts.push_back({"handoffs", std::to_string(f.handoffs)});
  }
  facts.push_back({"graphs_captured_in_launch", std::to_string(f.graphs_captured)});
  return facts;
}

void LayoutStep::setup(const Args& a, cudaStream_t stream) {
  // Round robin in both steps: colocated, it splits the requests between the engines; disaggregated,
  // both servers hold the same engine and the policy makes no difference.
  m_router = a.gpus->servers().make_router("round-robin");
  launch(a, stream);  // the decode graphs exist already (TwoGpuCluster captured them): this warms the rest
}

}  // namespace aisp::serving::disaggregated_ladder
