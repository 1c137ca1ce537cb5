// ch16:serving: the problem (model, workload, judge) and what every step shares (problem.hpp).
#include "serving/ladder/problem.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/model_config.hpp"

namespace aisp::serving::ladder {

namespace {

constexpr int k_block_size = 16;

}  // namespace

TargetInfo ServingProblem::target_info() {
  return {.chapter = "ch16",
          .ladder = "serving",
          .summary = "an LLM engine serving one workload: static batches -> continuous batching -> paged KV "
                     "-> chunked prefill -> CUDA graphs (wall clock, makespan)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0},
                   {.name = "requests", .default_value = 64, .help = "requests in the workload", .test_value = 6},
                   {.name = "prompt", .default_value = 512,
                    .help = "longest prompt (tokens); lengths uniform in [prompt/8, prompt]", .test_value = 40},
                   {.name = "output", .default_value = 128,
                    .help = "longest max_tokens; uniform in [output/4, output], all generated (ignore_eos)",
                    .test_value = 8},
                   {.name = "kv_blocks", .default_value = 1024,
                    .help = "KV-cache blocks of 16 tokens in the pool (memory that binds)", .test_value = 12},
                   {.name = "max_running", .default_value = 64, .help = "sequences per batch",
                    .test_value = 4},
                   {.name = "token_budget", .default_value = 2048,
                    .help = "tokens per engine step (prefill chunks and decodes together)", .test_value = 48}},
          .clock = ClockKind::wall,
          .default_mode = CacheMode::hot};
}

ServingProblem::ServingProblem() = default;
ServingProblem::~ServingProblem() = default;

void ServingProblem::allocate(const AxisValues& axes, const DeviceFacts&) {
  const std::string preset = ladder_model_preset(axes.at("model"), "ch16:serving");
  const auto narrow = [&](const char* name) {
    const std::int64_t v = axes.at(name);
    if (v > (1 << 24)) throw UsageError(fmt::format("ch16:serving: {}={} is too large", name, v));
    return static_cast<int>(v);
  };
  m_spec.requests = narrow("requests");
  m_spec.prompt_max = narrow("prompt");
  m_spec.prompt_min = std::max(1, m_spec.prompt_max / 8);
  m_spec.output_max = narrow("output");
  m_spec.output_min = std::max(1, m_spec.output_max / 4);
  const int kv_blocks = narrow("kv_blocks");
  const int blocks_per_request = (m_spec.prompt_max + m_spec.output_max + k_block_size - 1) / k_block_size;
  if (kv_blocks < blocks_per_request) {
    throw UsageError(fmt::format("ch16:serving: kv_blocks={} cannot hold one request of {} + {} tokens ({} blocks)",
                                 kv_blocks, m_spec.prompt_max, m_spec.output_max, blocks_per_request));
  }

  m_weights = std::make_unique<ModelWeights>(ModelWeights::open(cached_ladder_model(preset, "ch16:serving")));
  RunnerOptions opt;
  opt.block_size = k_block_size;
  opt.num_kv_blocks = kv_blocks;
  opt.max_batched_tokens = std::max(narrow("token_budget"), m_spec.prompt_max);
  opt.max_context = m_spec.prompt_max + m_spec.output_max;
  m_runner = std::make_unique<LlamaRunner>(*m_weights, opt);
  // Every decode graph step 05 can need, captured now, so that no launch captures one. The gate once
  // called step 05 INVALID (1.25x slower on fresh inputs, 1.656 vs 1.324 ms, one H200 at the test size,
  // 2026-11-28) and this was the suspected cause; but every seed serves the same lengths (shape_seed), so
  // fresh inputs bring no new (batch, context) shape, and three later passes of this ladder alone ranged
  // 0.80-1.22x across all five steps (2026-11-29): the wall-clock noise of a ~1.5 ms, 6-request launch,
  // which the fresh-input retest (docs/trust.md) now tells from state. The steps without graphs never
  // use them.
  m_runner->set_cuda_graphs(true);
  m_runner->capture_graphs(narrow("max_running"), opt.max_context);
  m_runner->set_cuda_graphs(false);
  const ModelConfig& cfg = m_runner->config();
  m_spec.vocab = cfg.vocab_size;
  m_spec.first_id = std::min(cfg.vocab_size - 1, 3);  // past the usual special ids of small vocabularies
  m_params = static_cast<double>(weight_bytes(cfg)) / 2.0;  // bf16
  m_weights.reset();  // the runner holds its own copy on the GPU

  m_tokens = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_spec.requests) * m_spec.output_max);
  m_prompts = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_spec.requests) * m_spec.prompt_max);
  m_args = {.runner = m_runner.get(),
            .requests = &m_requests,
            .tokens = m_tokens.data(),
            .max_new = m_spec.output_max,
            .max_running = narrow("max_running"),
            .token_budget = narrow("token_budget")};
}

void ServingProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  m_requests = make_ladder_workload(m_spec, seed);
  // The prompts also go to the device, padded with -1: the harness hashes its inputs there to see that a
  // step left them alone, and a new seed must change what it hashes.
  std::vector<std::int32_t> flat(m_prompts.size(), -1);
  for (std::size_t i = 0; i < m_requests.size(); ++i) {
    std::copy(m_requests[i].prompt.begin(), m_requests[i].prompt.end(),
              flat.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(m_spec.prompt_max)));
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_prompts.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> ServingProblem::inputs() const {
  return {{"prompts", m_prompts.data(), m_prompts.size(), DType::i32}};
}

std::vector<TensorView> ServingProblem::outputs() const {
  return {{"tokens", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work ServingProblem::work() const {
  return {.flops = 2.0 * m_params * ladder_workload_tokens(m_spec), .flop_dtype = "bf16"};
}

std::string ServingProblem::judge_outputs(cudaStream_t stream) {
  const std::size_t width = static_cast<std::size_t>(m_spec.output_max);
  std::vector<std::int32_t> got(m_tokens.size());
  AISP_CUDA_CHECK(cudaMemcpyAsync(got.data(), m_tokens.data(), got.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  JudgeTally tally;
  for (std::size_t i = 0; i < m_requests.size(); ++i) {
    const GenerationRequest& r = m_requests[i];
    const std::int32_t* row = got.data() + i * width;
    const auto n = static_cast<std::size_t>(r.max_tokens);
    for (std::size_t j = 0; j < width; ++j) {
      const bool in_range = row[j] >= 0 && row[j] < m_spec.vocab;
      if (j < n && !in_range) {
        return fmt::format("request {}: generated token {} is {}, not a token id (expected {} tokens)", i, j,
                           row[j], n);
      }
      if (j >= n && row[j] != -1) {
        return fmt::format("request {}: {} tokens where max_tokens is {}", i, j + 1, n);
      }
    }
    const std::string why = gpu::judge_generation(*m_runner, r.prompt, {row, n}, static_cast<int>(i), tally);
    if (!why.empty()) return why;
  }
  return judge_totals(tally);
}

SchedulerConfig base_scheduler_config(const Args& a) {
  SchedulerConfig c;
  c.max_running = a.max_running;
  c.max_batched_tokens = a.token_budget;
  c.block_size = k_block_size;
  c.max_waiting = static_cast<int>(a.requests->size()) + 1;  // every request queues: none is refused
  return c;
}

void serve_all(const Args& a, EngineLoop& engine, cudaStream_t stream) {
  const std::size_t n = a.requests->size();
  std::vector<std::vector<TokenId>> tokens(n);
  std::mutex mutex;
  std::condition_variable done;
  std::size_t left = n;
  std::string failure;
  for (std::size_t i = 0; i < n; ++i) {
    // The sink runs on the engine thread; tokens[i] is written there only, and read here after the
    // request's final event, which the mutex orders before the read.
    auto sink = [&, i](const TokenEvent& e) {
      if (e.token >= 0) tokens[i].push_back(e.token);
      if (!e.finished) return;
      std::lock_guard lock(mutex);
      if (e.reason != FinishReason::length && failure.empty()) {
        failure = fmt::format("request {} ended early ({})", i, e.error.empty() ? "not by length" : e.error);
      }
      if (--left == 0) done.notify_one();
    };
    const SubmitResult s = engine.submit((*a.requests)[i], std::move(sink));
    if (s.status != SubmitStatus::accepted) {
      // Requests already accepted still reference this frame's state: wait for them before throwing.
      std::unique_lock lock(mutex);
      left -= n - i;
      done.wait(lock, [&] { return left == 0; });
      throw std::runtime_error(fmt::format("ch16:serving: request {} refused: {}", i, s.message));
    }
  }
  {
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return left == 0; });
    if (!failure.empty()) throw std::runtime_error("ch16:serving: " + failure);
  }
  // The output, as a step would hand it to a client: each row's tokens, then -1.
  std::vector<std::int32_t> flat(n * static_cast<std::size_t>(a.max_new), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t count = std::min(tokens[i].size(), static_cast<std::size_t>(a.max_new));
    std::copy_n(tokens[i].begin(), count, flat.begin() + static_cast<std::ptrdiff_t>(i * a.max_new));
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.tokens, flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

void EngineStep::setup(const Args& a, cudaStream_t stream) {
  SchedulerConfig c = base_scheduler_config(a);
  m_configure(c);
  // A step without chunked prefill takes every prompt whole into one engine step, so a token budget
  // below the longest prompt is outside its domain (the scheduler would refuse the request): SKIPPED
  // with the reason, as a configuration this step cannot run, not an ERROR.
  std::size_t longest = 0;
  for (const auto& r : *a.requests) longest = std::max(longest, r.prompt.size());
  if (!whole_prompt_refusal(c, longest).empty()) {
    throw VariantUnavailable(fmt::format(
        "whole prompts (no chunked prefill) need token_budget >= the longest prompt: {} tokens > {}; "
        "the chunked steps run this configuration",
        longest, c.max_batched_tokens));
  }
  m_engine = std::make_unique<EngineLoop>(*a.runner, c, "ch16:serving");
  // One workload served here, outside any measurement, so that facts() (read once after setup) reports
  // this configuration's steps and preemptions per launch; the tokens it writes are poisoned before the
  // gate looks.
  launch(a, stream);
}

void EngineStep::launch(const Args& a, cudaStream_t stream) {
  a.runner->set_cuda_graphs(m_cuda_graphs);  // the engine thread is idle between launches
  const EngineStats before = m_engine->stats();
  const GraphStats graphs_before = a.runner->graph_stats();
  serve_all(a, *m_engine, stream);
  const EngineStats after = m_engine->stats();
  const GraphStats graphs_after = a.runner->graph_stats();
  m_last_steps = after.steps - before.steps;
  m_last_preemptions = after.preemptions - before.preemptions;
  m_last_graphs = {graphs_after.captured - graphs_before.captured, graphs_after.replays - graphs_before.replays,
                   graphs_after.eager_steps - graphs_before.eager_steps,
                   graphs_after.padding_rows - graphs_before.padding_rows};
}

std::vector<Fact> EngineStep::facts(const Args&) {
  const SchedulerConfig& c = m_engine->config();
  return {{"policy", policy_name(c.policy)},
          {"kv", kv_mode_name(c.kv_mode)},
          {"chunked_prefill", c.chunked_prefill ? "on" : "off"},
          {"engine_steps", std::to_string(m_last_steps)},
          {"preemptions", std::to_string(m_last_preemptions)},
          {"cuda_graphs", m_cuda_graphs ? fmt::format("on: {} of the steps replayed, {} padding rows",
                                                      m_last_graphs.replays, m_last_graphs.padding_rows)
                                        : "off"}};
}

}  // namespace aisp::serving::ladder
