// ch15:disaggregated: the problem (two runners, the cluster, the workload, the judge) and the launch both
// steps share (problem.hpp).
#include "serving/disaggregated_ladder/problem.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/disaggregated.hpp"
#include "serving/engine_loop.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/ladder_workload.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving::disaggregated_ladder {

namespace {

constexpr int k_block_size = 16;
constexpr const char* k_target = "ch15:disaggregated";
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

TargetInfo DisaggregatedProblem::target_info() {
  return {.chapter = "ch15",
          .ladder = "disaggregated",
          .summary = "two GPUs, the same Poisson workload: two colocated engines -> prefill on one GPU, decode "
                     "on the other with the KV blocks moved between them (wall clock, makespan; goodput under "
                     "an SLO)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0},
                   {.name = "requests", .default_value = 256, .help = "requests in the workload", .test_value = 12},
                   {.name = "input", .default_value = 2048,
                    .help = "longest prompt (tokens); lengths uniform in [input/8, input]", .test_value = 48},
                   {.name = "output", .default_value = 256,
                    .help = "longest output (tokens); uniform in [output/8, output], all generated", .test_value = 8},
                   {.name = "rate", .default_value = 16,
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

DisaggregatedProblem::~DisaggregatedProblem() {
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

void DisaggregatedProblem::allocate(const AxisValues& axes, const DeviceFacts& device) {
  const std::string preset = ladder_model_preset(axes.at("model"), k_target);
  const auto narrow = [&](const char* name, std::int64_t most) {
    const std::int64_t v = axes.at(name);
    if (v > most) throw UsageError(fmt::format("{}: {}={} is too large (at most {})", k_target, name, v, most));
    return static_cast<int>(v);
  };
  m_spec.requests = narrow("requests", 1 << 16);
  m_spec.tenants = 1;
  m_spec.system_tokens = 0;
  m_spec.user_max = narrow("input", 1 << 20);
  m_spec.output_max = narrow("output", 1 << 20);
  m_max_running = narrow("max_running", 4096);
  m_token_budget = narrow("token_budget", 1 << 20);
  const int kv_blocks = narrow("kv_blocks", 1 << 24);
  m_load = {.rate = static_cast<double>(narrow("rate", 1 << 20)),
            .concurrency = narrow("concurrency", 1 << 16),
            .seed = k_arrival_seed};
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

void DisaggregatedProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  if (m_runners.empty()) return;  // one GPU: nothing runs (allocate)
  m_workload = make_tenant_workload(m_spec, seed);
  std::vector<std::int32_t> flat;
  flat.reserve(m_inputs.size());
  for (const Prompt& p : m_workload.prompts) flat.insert(flat.end(), p.ids.begin(), p.ids.end());
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_inputs.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> DisaggregatedProblem::inputs() const {
  return {{"prompts", m_inputs.data(), m_inputs.size(), DType::i32}};
}

std::vector<TensorView> DisaggregatedProblem::outputs() const {
  return {{"outputs", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work DisaggregatedProblem::work() const {
  return {.flops = 2.0 * m_params * m_distinct_tokens, .flop_dtype = "bf16"};
}

Args DisaggregatedProblem::args() const {
  return {.runners = &m_runners,
          .cluster = m_cluster.get(),
          .workload = &m_workload,
          .tokens = m_tokens.data(),
          .max_output = m_spec.output_max,
          .max_running = m_max_running,
          .token_budget = m_token_budget,
          .load = m_load,
          .slo = m_slo};
}

std::string DisaggregatedProblem::judge_outputs(cudaStream_t stream) {
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
    // This device's runner judges every output: both runners hold the same weights, and its KV blocks
    // are free (the launch's engines are gone).
    const std::string why = gpu::judge_generation(*m_runners.front(), p.ids,
                                                  {row, static_cast<std::size_t>(p.output_len)},
                                                  static_cast<int>(i), tally);
    if (!why.empty()) return why;
  }
  return judge_totals(tally);
}

LayoutFacts serve_layout(const Args& a, const Router& router, Layout layout, cudaStream_t stream) {
  SchedulerConfig config;
  config.max_running = a.max_running;
  config.max_batched_tokens = a.token_budget;
  config.block_size = k_block_size;
  config.max_waiting = static_cast<int>(a.workload->prompts.size()) + 1;  // none is refused
  LlamaRunner& here = *(*a.runners)[0];
  LlamaRunner& next = *(*a.runners)[1];
  LayoutFacts facts;
  ClusterRun run;
  if (layout == Layout::colocated) {
    // Fresh engines every launch, as every step of ch17:routing: nothing carries over.
    std::vector<std::unique_ptr<EngineLoop>> loops;
    loops.push_back(std::make_unique<EngineLoop>(here, config, k_target));
    loops.push_back(std::make_unique<EngineLoop>(next, config, k_target));
    const std::vector<Engine*> engines = {loops[0].get(), loops[1].get()};
    run = a.cluster->serve(router, engines, *a.workload, a.load);
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
    run = a.cluster->serve(router, engines, *a.workload, a.load);
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
  if (const std::string why = check_complete(run, *a.workload); !why.empty()) {
    throw std::runtime_error(
        fmt::format("{} ({}): {}", k_target, layout == Layout::colocated ? "colocated" : "disaggregated", why));
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
  return facts;
}

void LayoutStep::setup(const Args& a, cudaStream_t stream) {
  // Round robin in both steps: colocated, it splits the requests between the engines; disaggregated,
  // both servers hold the same engine and the policy makes no difference.
  m_router = a.cluster->make_router("round-robin");
  launch(a, stream);  // captures the decode graphs of the shapes it meets
  launch(a, stream);  // the facts: a launch like the timed ones
}

}  // namespace aisp::serving::disaggregated_ladder
