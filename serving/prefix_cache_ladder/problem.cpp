// ch17:prefix_cache: the problem (model, conversations, judge) and the launch both steps share
// (problem.hpp).
#include "serving/prefix_cache_ladder/problem.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/judge.hpp"
#include "serving/ladder_workload.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"

namespace aisp::serving::prefix_cache_ladder {

namespace {

constexpr int k_block_size = 16;
constexpr const char* k_target = "ch17:prefix_cache";
// The chats' shape (message and answer lengths) comes from this seed, their token ids from the run's:
// every seed serves the same number of tokens, so the declared work is exact for all of them.
constexpr std::uint64_t k_shape_seed = 1;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

TargetInfo PrefixCacheProblem::target_info() {
  return {.chapter = "ch17",
          .ladder = "prefix_cache",
          .summary = "multi-turn chats with a shared system prompt: every prompt prefilled -> KV blocks of "
                     "cached prefixes reused (wall clock, makespan)",
          .axes = {{.name = "model", .default_value = 1,
                    .help = "model shape, random weights: 0 = tiny, 1 = Llama-3.2-1B, 8 = Llama-3-8B",
                    .min_value = 0, .test_value = 0},
                   {.name = "conversations", .default_value = 32, .help = "chats served together",
                    .test_value = 3},
                   {.name = "turns", .default_value = 4, .help = "user/answer rounds per chat", .test_value = 2},
                   {.name = "system", .default_value = 1024,
                    .help = "tokens of the system prompt every chat starts with (0: none)", .min_value = 0,
                    .test_value = 40},
                   {.name = "user", .default_value = 128,
                    .help = "longest user message (tokens); lengths uniform in [user/4, user]", .test_value = 8},
                   {.name = "output", .default_value = 64,
                    .help = "longest answer (tokens); uniform in [output/4, output], all generated",
                    .test_value = 6},
                   {.name = "kv_blocks", .default_value = 4096,
                    .help = "KV-cache blocks of 16 tokens in the pool (fewer: cached blocks get evicted)",
                    .test_value = 64},
                   {.name = "max_running", .default_value = 64, .help = "sequences per batch", .test_value = 4},
                   {.name = "token_budget", .default_value = 4096,
                    .help = "tokens per engine step (prefill chunks and decodes together)", .test_value = 48}},
          .clock = ClockKind::wall,
          .default_mode = CacheMode::hot};
}

PrefixCacheProblem::PrefixCacheProblem() = default;
PrefixCacheProblem::~PrefixCacheProblem() = default;

void PrefixCacheProblem::allocate(const AxisValues& axes, const DeviceFacts&) {
  const std::string preset = ladder_model_preset(axes.at("model"), k_target);
  const auto narrow = [&](const char* name, std::int64_t most) {
    const std::int64_t v = axes.at(name);
    if (v > most) throw UsageError(fmt::format("{}: {}={} is too large (at most {})", k_target, name, v, most));
    return static_cast<int>(v);
  };
  m_conversations = narrow("conversations", 4096);
  m_turns = narrow("turns", 64);
  m_system = narrow("system", 1 << 20);
  m_user = narrow("user", 1 << 20);
  m_output = narrow("output", 1 << 20);
  m_max_running = narrow("max_running", 4096);
  m_token_budget = narrow("token_budget", 1 << 20);
  const int kv_blocks = narrow("kv_blocks", 1 << 24);

  // The chats' shape: message and answer lengths from the fixed shape seed.
  std::mt19937_64 shape(k_shape_seed);
  std::uniform_int_distribution<int> user_len(std::max(1, m_user / 4), m_user);
  std::uniform_int_distribution<int> answer_len(std::max(1, m_output / 4), m_output);
  m_chats.assign(static_cast<std::size_t>(m_conversations), Chat{});
  m_distinct_tokens = m_system;
  int longest = 0;
  for (Chat& c : m_chats) {
    int context = m_system;
    for (int t = 0; t < m_turns; ++t) {
      c.user.emplace_back(static_cast<std::size_t>(user_len(shape)), 0);
      c.answer.push_back(answer_len(shape));
      context += static_cast<int>(c.user.back().size()) + c.answer.back();
      m_distinct_tokens += static_cast<double>(c.user.back().size()) + c.answer.back();
    }
    longest = std::max(longest, context);
  }
  const int blocks_per_chat = (longest + k_block_size - 1) / k_block_size;
  if (kv_blocks < blocks_per_chat) {
    throw UsageError(fmt::format("{}: kv_blocks={} cannot hold one chat of {} tokens ({} blocks)", k_target,
                                 kv_blocks, longest, blocks_per_chat));
  }

  const ModelWeights weights = ModelWeights::open(cached_ladder_model(preset, k_target));
  RunnerOptions opt;
  opt.block_size = k_block_size;
  opt.num_kv_blocks = kv_blocks;
  opt.max_batched_tokens = m_token_budget;
  opt.max_context = longest;
  m_runner = std::make_unique<LlamaRunner>(weights, opt);
  const ModelConfig& cfg = m_runner->config();
  m_vocab = cfg.vocab_size;
  m_first_id = std::min(cfg.vocab_size - 1, 3);  // past the usual special ids of small vocabularies
  m_params = static_cast<double>(weight_bytes(cfg)) / 2.0;  // bf16

  std::size_t input_tokens = static_cast<std::size_t>(m_system);
  for (const Chat& c : m_chats) {
    for (const auto& u : c.user) input_tokens += u.size();
  }
  m_inputs = DeviceBuffer<std::int32_t>(std::max<std::size_t>(input_tokens, 1));
  m_tokens = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_turns) * m_conversations * m_output);
}

void PrefixCacheProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenId> id(m_first_id, m_vocab - 1);
  m_system_prompt.resize(static_cast<std::size_t>(m_system));
  for (TokenId& t : m_system_prompt) t = id(rng);
  std::vector<std::int32_t> flat(m_system_prompt.begin(), m_system_prompt.end());
  for (Chat& c : m_chats) {
    for (auto& u : c.user) {
      for (TokenId& t : u) t = id(rng);
      flat.insert(flat.end(), u.begin(), u.end());
    }
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(m_inputs.data(), flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here
}

std::vector<TensorView> PrefixCacheProblem::inputs() const {
  return {{"messages", m_inputs.data(), m_inputs.size(), DType::i32}};
}

std::vector<TensorView> PrefixCacheProblem::outputs() const {
  return {{"answers", m_tokens.data(), m_tokens.size(), DType::i32}};
}

Work PrefixCacheProblem::work() const { return {.flops = 2.0 * m_params * m_distinct_tokens, .flop_dtype = "bf16"}; }

Args PrefixCacheProblem::args() const {
  return {.runner = m_runner.get(),
          .system = &m_system_prompt,
          .chats = &m_chats,
          .tokens = m_tokens.data(),
          .prompts = &m_last_prompts,
          .turns = m_turns,
          .max_answer = m_output,
          .max_running = m_max_running,
          .token_budget = m_token_budget};
}

std::string PrefixCacheProblem::judge_outputs(cudaStream_t stream) {
  std::vector<std::int32_t> got(m_tokens.size());
  AISP_CUDA_CHECK(cudaMemcpyAsync(got.data(), m_tokens.data(), got.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (m_last_prompts.size() != static_cast<std::size_t>(m_turns)) return "no launch recorded its prompts";
  JudgeTally tally;
  int request = 0;
  for (int t = 0; t < m_turns; ++t) {
    for (int c = 0; c < m_conversations; ++c, ++request) {
      const int n = m_chats[static_cast<std::size_t>(c)].answer[static_cast<std::size_t>(t)];
      const std::int32_t* row = got.data() + static_cast<std::size_t>(request) * m_output;
      for (int j = 0; j < m_output; ++j) {
        const bool token = row[j] >= 0 && row[j] < m_vocab;
        if (j < n && !token) return fmt::format("turn {} chat {}: answer token {} is {}", t, c, j, row[j]);
        if (j >= n && row[j] != -1) return fmt::format("turn {} chat {}: more than {} tokens", t, c, n);
      }
      const auto& prompt = m_last_prompts[static_cast<std::size_t>(t)][static_cast<std::size_t>(c)];
      const std::string why =
          gpu::judge_generation(*m_runner, prompt, {row, static_cast<std::size_t>(n)}, request, tally);
      if (!why.empty()) return why;
    }
  }
  return judge_totals(tally);
}

LaunchFacts serve_conversations(const Args& a, bool prefix_cache, cudaStream_t stream) {
  SchedulerConfig config;
  config.max_running = a.max_running;
  config.max_batched_tokens = a.token_budget;
  config.block_size = k_block_size;
  config.max_waiting = static_cast<int>(a.chats->size()) + 1;  // a whole turn queues: none is refused
  config.prefix_cache = prefix_cache;
  a.runner->set_cuda_graphs(true);
  EngineLoop engine(*a.runner, config, k_target);  // fresh: an empty cache

  using Clock = std::chrono::steady_clock;
  const std::size_t n = a.chats->size();
  std::vector<std::vector<TokenId>> history(n, *a.system);  // each chat's context so far
  a.prompts->assign(static_cast<std::size_t>(a.turns), {});
  std::vector<std::int32_t> flat(static_cast<std::size_t>(a.turns) * n * a.max_answer, -1);
  std::vector<double> ttft_ms;
  for (int t = 0; t < a.turns; ++t) {
    std::vector<std::vector<TokenId>> answers(n);
    std::vector<Clock::time_point> first(n);
    std::mutex mutex;
    std::condition_variable done;
    std::size_t left = n;
    std::string failure;
    std::vector<Clock::time_point> submitted(n);
    for (std::size_t c = 0; c < n; ++c) {
      const Chat& chat = (*a.chats)[c];
      const auto& user = chat.user[static_cast<std::size_t>(t)];
      history[c].insert(history[c].end(), user.begin(), user.end());
      (*a.prompts)[static_cast<std::size_t>(t)].push_back(history[c]);
      GenerationRequest r{.prompt = history[c], .max_tokens = chat.answer[static_cast<std::size_t>(t)],
                          .ignore_eos = true};
      // The sink runs on the engine thread; answers[c] and first[c] are written there only and read
      // here after the final event, which the mutex orders before the read.
      auto sink = [&, c](const TokenEvent& e) {
        if (e.token >= 0) {
          if (answers[c].empty()) first[c] = Clock::now();
          answers[c].push_back(e.token);
        }
        if (!e.finished) return;
        std::lock_guard lock(mutex);
        if (e.reason != FinishReason::length && failure.empty()) {
          failure = fmt::format("turn {} chat {} ended early ({})", t, c, e.error.empty() ? "not by length" : e.error);
        }
        if (--left == 0) done.notify_one();
      };
      submitted[c] = Clock::now();
      const SubmitResult s = engine.submit(std::move(r), std::move(sink));
      if (s.status != SubmitStatus::accepted) {
        std::unique_lock lock(mutex);  // those accepted still use this frame: wait for them first
        left -= n - c;
        done.wait(lock, [&] { return left == 0; });
        throw std::runtime_error(fmt::format("{}: turn {} chat {} refused: {}", k_target, t, c, s.message));
      }
    }
    {
      std::unique_lock lock(mutex);
      done.wait(lock, [&] { return left == 0; });
      if (!failure.empty()) throw std::runtime_error(std::string(k_target) + ": " + failure);
    }
    for (std::size_t c = 0; c < n; ++c) {
      ttft_ms.push_back(std::chrono::duration<double, std::milli>(first[c] - submitted[c]).count());
      history[c].insert(history[c].end(), answers[c].begin(), answers[c].end());
      const std::size_t row = (static_cast<std::size_t>(t) * n + c) * a.max_answer;
      std::copy_n(answers[c].begin(), std::min<std::size_t>(answers[c].size(), a.max_answer), flat.begin() + row);
    }
  }
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.tokens, flat.data(), flat.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `flat` dies here

  const EngineStats st = engine.stats();
  LaunchFacts f;
  f.queried_tokens = st.prefix_cache_queried_tokens;
  f.hit_tokens = st.prefix_cache_hit_tokens;
  f.prompt_tokens = st.prompt_tokens;
  f.evictions = st.prefix_cache_evictions;
  f.preemptions = st.preemptions;
  f.ttft_p50_ms = percentile(ttft_ms, 0.5);
  f.ttft_p90_ms = percentile(ttft_ms, 0.9);
  return f;
}

std::vector<Fact> launch_facts(const LaunchFacts& f, bool prefix_cache) {
  std::vector<Fact> facts;
  if (prefix_cache) {
    const double rate = f.queried_tokens > 0 ? static_cast<double>(f.hit_tokens) / static_cast<double>(f.queried_tokens) : 0;
    facts.push_back({"hit_rate", fmt::format("{:.3f} ({} of {} tokens)", rate, f.hit_tokens, f.queried_tokens)});
    facts.push_back({"evictions", std::to_string(f.evictions)});
  }
  facts.push_back({"ttft_ms_p50_p90", fmt::format("{:.1f} / {:.1f} (host clock, last launch)", f.ttft_p50_ms, f.ttft_p90_ms)});
  facts.push_back({"preemptions", std::to_string(f.preemptions)});
  return facts;
}

}  // namespace aisp::serving::prefix_cache_ladder
