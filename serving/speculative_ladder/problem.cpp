// ch18:speculative: the problem (model, requests, judge) and what every step shares (problem.hpp).
#include "serving/speculative_ladder/problem.hpp"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/ladder_workload.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"

namespace aisp::serving::speculative_ladder {

namespace {

constexpr int k_block_size = 16;
constexpr const char* k_target = "ch18:speculative";

}  // namespace

TargetInfo SpeculativeProblem::target_info() {
  return {.chapter = "ch18",
          .ladder = "speculative",
          .summary = "greedy decoding of a batch: token by token -> prompt-lookup drafts -> a layer-skipping "
                     "draft model -> an FP8 copy of the target as draft, k drafts verified per target step (wall "
                     "clock, makespan)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0,
                    // Both by default: Llama-3.2-1B, whose random-weight greedy output does not repeat (drafts
                    // rarely match), and tiny, whose 1,024-token vocabulary makes greedy decoding cycle within
                    // a few dozen tokens (prompt lookup then drafts it well): where speculation loses and wins.
                    .default_sweep = {1, 0}},
                   {.name = "batch", .default_value = 1, .help = "requests decoded together", .test_value = 2,
                    .default_sweep = {1, 4, 16}},
                   {.name = "prompt", .default_value = 256, .help = "prompt tokens per request (random ids)",
                    .test_value = 24},
                   {.name = "output", .default_value = 128,
                    .help = "tokens generated per request (ignore_eos: all of them)", .test_value = 12},
                   {.name = "num_draft", .default_value = 4, .help = "k: drafts verified per target step",
                    .test_value = 3},
                   {.name = "draft_layers", .default_value = 0,
                    .help = "layers of the target kept by the layer-skipping draft, fewer than the model's (0: a "
                            "quarter of them, at least 1)",
                    .min_value = 0, .test_value = 1}},
          .clock = ClockKind::wall,
          .default_mode = CacheMode::hot};
}

SpeculativeProblem::SpeculativeProblem() = default;
SpeculativeProblem::~SpeculativeProblem() = default;

void SpeculativeProblem::allocate(const AxisValues& axes, const DeviceFacts&) {
  const std::string preset = ladder_model_preset(axes.at("model"), k_target);
  const auto narrow = [&](const char* name, std::int64_t most) {
    const std::int64_t v = axes.at(name);
    if (v > most) throw UsageError(fmt::format("{}: {}={} is too large (at most {})", k_target, name, v, most));
    return static_cast<int>(v);
  };
  m_batch = narrow("batch", 256);
  m_prompt = narrow("prompt", 1 << 16);
  m_output = narrow("output", 1 << 16);
  const int k = narrow("num_draft", 32);
  int draft_layers = narrow("draft_layers", 1 << 10);

  m_fp8_draft.reset();  // a previous point's, if step 04 ran there
  m_model_dir = cached_ladder_model(preset, k_target);
  const ModelWeights weights = ModelWeights::open(m_model_dir);
  const int layers = weights.config().num_hidden_layers;
  if (draft_layers >= layers) {
    throw UsageError(fmt::format("{}: draft_layers={} must be fewer than the model's {} layers", k_target,
                                 draft_layers, layers));
  }
  if (draft_layers == 0) draft_layers = std::max(1, layers / 4);
  // Every sequence's whole context fits from the start (this driver does not preempt): prompt + output,
  // plus k positions a last verification may write past the end.
  const int context = m_prompt + m_output + k + 1;
  const int blocks = m_batch * ((context + k_block_size - 1) / k_block_size) + 1;
  RunnerOptions opt;
  opt.block_size = k_block_size;
  opt.num_kv_blocks = blocks;
  opt.max_batched_tokens = std::max(2048, std::min(m_batch * m_prompt, 8192));
  opt.max_context = context;
  opt.cuda_graphs = true;
  m_target = std::make_unique<LlamaRunner>(weights, opt);
  // What a launch would otherwise do the first time it meets a shape, done now: the GEMM plans of steps
  // of up to batch x (1 + k) rows (a verification; a draft catching up on what the target accepted),
  // each run once (a new plan may pick a cuBLASLt kernel the lazy module loader has not loaded), the
  // eager step's buffers at their largest (none then grows, a cudaFree, mid-launch), and the decode
  // graphs of batches of up to `batch` sequences (a batch shrinks as its sequences finish, at
  // points that depend on the prompts). The gate's fresh-input check compares a launch on new prompts
  // with a repeat of it: on nvidia-h200-x2 it found 02_prompt_lookup's first launch 1.4-1.5x its repeat
  // at the test size, twice, the second time with the plans already made here (not run).
  m_step_rows = m_batch * (k + 1);
  m_context = context;
  m_target->prepare_eager_steps(m_step_rows);
  m_target->capture_graphs(m_batch, m_context);
  m_draft_options = opt;
  opt.num_layers = draft_layers;
  m_draft = std::make_unique<LlamaRunner>(weights, opt);
  m_draft->prepare_eager_steps(m_step_rows);
  m_draft->capture_graphs(m_batch, m_context);

  const ModelConfig& cfg = m_target->config();
  m_vocab = cfg.vocab_size;
  m_first_id = std::min(cfg.vocab_size - 1, 3);  // past the usual special ids of small vocabularies
  m_params = static_cast<double>(weight_bytes(cfg)) / 2.0;  // bf16
  m_tokens = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_batch) * m_output);
  m_prompts = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_batch) * m_prompt);
  m_args = {.target = m_target.get(),
            .draft = m_draft.get(),
            .fp8_draft = [this]() -> LlamaRunner& { return fp8_draft(); },
            .requests = &m_requests,
            .tokens = m_tokens.data(),
            .output = m_output,
            .num_draft = k};
}

LlamaRunner& SpeculativeProblem::fp8_draft() {
  if (!m_fp8_draft) {
    RunnerOptions opt = m_draft_options;
    opt.fp8_weights = true;
    m_fp8_draft = std::make_unique<LlamaRunner>(ModelWeights::open(m_model_dir), opt);
    m_fp8_draft->prepare_eager_steps(m_step_rows);
    m_fp8_draft->capture_graphs(m_batch, m_context);
  }
  return *m_fp8_draft;
}

void SpeculativeProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenId> id(m_first_id, m_vocab - 1);
  m_requests.assign(static_cast<std::size_t>(m_batch), GenerationRequest{});
  std::vector<std::int32_t> flat;
  for (GenerationRequest& r : m_requests) {
    r.prompt.resize(static_cast<std::size_t>(m_prompt));
    for (TokenId& t : r.prompt) t = id(rng);
    r.max_tokens = m_output;
    r.ignore_eos = true;
    flat.insert(flat.end(), r.prompt.begin(), r.prompt.end());
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_prompts.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> SpeculativeProblem::inputs() const {
  return {{"prompts", m_prompts.data(), m_prompts.size(), DType::i32}};
}

std::vector<TensorView> SpeculativeProblem::outputs() const {
  return {{"tokens", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work SpeculativeProblem::work() const {
  return {.flops = 2.0 * m_params * m_batch * (m_prompt + m_output), .flop_dtype = "bf16"};
}

std::string SpeculativeProblem::judge_outputs(cudaStream_t stream) {
  std::vector<std::int32_t> got(m_tokens.size());
  AISP_CUDA_CHECK(cudaMemcpyAsync(got.data(), m_tokens.data(), got.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  JudgeTally tally;
  for (std::size_t i = 0; i < m_requests.size(); ++i) {
    const std::int32_t* row = got.data() + i * static_cast<std::size_t>(m_output);
    for (int j = 0; j < m_output; ++j) {
      if (row[j] < 0 || row[j] >= m_vocab) {
        return fmt::format("request {}: generated token {} is {}, not a token id", i, j, row[j]);
      }
    }
    const std::string why = gpu::judge_generation(*m_target, m_requests[i].prompt,
                                                  {row, static_cast<std::size_t>(m_output)}, static_cast<int>(i), tally);
    if (!why.empty()) return why;
  }
  return judge_totals(tally);
}

LadderRun run_requests(const Args& a, Drafter* drafter, cudaStream_t stream) {
  a.target->set_cuda_graphs(true);
  const auto captured = [&] { return a.target->graph_stats().captured + a.draft->graph_stats().captured; };
  const int captured_before = captured();
  SpeculativeRun run = generate_speculative(*a.target, drafter, *a.requests, {.num_draft = a.num_draft});
  const int captured_now = captured() - captured_before;
  std::vector<std::int32_t> flat;
  for (std::size_t i = 0; i < run.outputs.size(); ++i) {
    const SpeculativeGeneration& g = run.outputs[i];
    if (g.reason != FinishReason::length || static_cast<int>(g.tokens.size()) != a.output) {
      throw std::runtime_error(fmt::format("{}: request {} ended after {} of {} tokens", k_target, i,
                                           g.tokens.size(), a.output));
    }
    flat.insert(flat.end(), g.tokens.begin(), g.tokens.end());
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.tokens, flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
  return {std::move(run), captured_now};
}

std::vector<Fact> run_facts(const LadderRun& last, bool drafted) {
  const SpeculativeRun& run = last.run;
  std::vector<Fact> facts{{"target_steps", std::to_string(run.steps)},
                          {"graphs_captured_in_launch", std::to_string(last.graphs_captured)}};
  if (drafted) {
    facts.push_back({"acceptance", fmt::format("{:.3f}", run.stats.acceptance_rate())});
    facts.push_back({"tokens_per_verification", fmt::format("{:.2f}", run.stats.tokens_per_verification())});
    facts.push_back({"drafts", run.stats.summary()});
  }
  return facts;
}

}  // namespace aisp::serving::speculative_ladder
