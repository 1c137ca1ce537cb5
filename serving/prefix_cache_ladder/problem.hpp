// ch17:prefix_cache — automatic prefix caching in the serving engine: multi-turn chats that share a system
// prompt, served with and without reusing the KV blocks of prefixes already computed (serving/
// prefix_cache.hpp, SchedulerConfig::prefix_cache).
//
// Workload: `conversations` chats of `turns` turns each. Every chat starts with the same system prompt
// (`system` tokens), then alternates a user message (uniform in [user/4, user] tokens) and the model's
// answer (uniform in [output/4, output] tokens, all generated: ignore_eos). Turn t's prompt is the system
// prompt and the whole history: turn t - 1's prompt, its answer and the new user message. All chats'
// turn t are submitted together; turn t + 1 goes out when every answer of turn t is back (a round of
// users replying at once). Without a cache every prompt is prefilled from its first token; with it, the
// system prompt is computed once and each later turn starts after the blocks of its own history.
// Axis kv_blocks sets the pool: when it cannot hold every chat's history between turns, cached blocks are
// evicted (LRU) and the cache pays less: the regime where it stops paying is that axis.
//
// Clock: wall, hot. One launch serves every turn of every chat through a fresh EngineLoop (so each launch
// starts with an empty cache: a warm cache from the previous launch would make every prompt a hit) over
// the problem's one LlamaRunner, continuous batching, paged KV, chunked prefill and CUDA-graph decode
// steps (ch16:serving's fastest configuration). The time is the makespan of the whole conversation
// workload. Facts per step, from its last launch: the prefix-cache hit rate (tokens found cached over
// tokens looked up), the prompt tokens computed, and the time to first token (p50 and p90 over every
// request, host clock from submission to the first token; the harness's timing is the makespan).
//
// Gate: as ch16:serving (serving/ladder_workload.hpp): each answer's tokens are teacher-forced against its
// own prompt, each the model's best token or within a bf16 near-tie of it. A cached prefix must give the
// same K/V as computing it: a wrong block would change the logits and fail here.
//
// Declared work: 2 x parameters x the distinct tokens of the workload (the system prompt once, then every
// user message and answer once), bf16: the least any engine must compute to serve it, the same for both
// steps. A floor: the step that recomputes histories does more than it declares, so its MFU reads low, and
// no step's can read higher than the work it truly did.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/buffer.hpp"
#include "device/ladder.hpp"
#include "serving/engine_api.hpp"
#include "serving/engine_loop.hpp"
#include "serving/gpu/llama_runner.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving::prefix_cache_ladder {

// One chat's fixed parts: the user messages and the answer lengths (the answers' tokens are the model's).
struct Chat {
  std::vector<std::vector<TokenId>> user;  // per turn
  std::vector<int> answer;                 // per turn: max_tokens
};

struct Args {
  LlamaRunner* runner = nullptr;
  const std::vector<TokenId>* system = nullptr;
  const std::vector<Chat>* chats = nullptr;
  std::int32_t* tokens = nullptr;  // device: [turn][chat][max_answer], each answer's tokens then -1
  // Host copy of the last launch's prompts ([turn][chat]) for the judge.
  std::vector<std::vector<std::vector<TokenId>>>* prompts = nullptr;
  int turns = 0;
  int max_answer = 0;
  int max_running = 0;
  int token_budget = 0;
};

// What a step learned from its last launch.
struct LaunchFacts {
  std::int64_t queried_tokens = 0, hit_tokens = 0, prompt_tokens = 0;
  std::int64_t evictions = 0, preemptions = 0;
  double ttft_p50_ms = 0, ttft_p90_ms = 0;
};

// One launch: a fresh engine (prefix_cache on or off) serves every turn; the answers go to a.tokens on
// `stream`, the prompts to *a.prompts. Throws if a request is refused or ends other than by its length.
LaunchFacts serve_conversations(const Args& a, bool prefix_cache, cudaStream_t stream);
std::vector<Fact> launch_facts(const LaunchFacts& f, bool prefix_cache);

class PrefixCacheProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  PrefixCacheProblem();
  ~PrefixCacheProblem() override;

  void allocate(const AxisValues& axes, const DeviceFacts& device) override;
  void generate(std::uint64_t seed, cudaStream_t stream) override;
  std::vector<TensorView> inputs() const override;
  std::vector<TensorView> outputs() const override;
  std::vector<TensorView> references() const override { return {}; }
  Tolerance tolerance() const override { return {0, 0}; }  // unused: judge_outputs decides
  Work work() const override;
  Args args() const override;
  std::string judge_outputs(cudaStream_t stream) override;

 private:
  int m_conversations = 0, m_turns = 0, m_system = 0, m_user = 0, m_output = 0;
  int m_vocab = 0, m_first_id = 0, m_max_running = 0, m_token_budget = 0;
  std::unique_ptr<LlamaRunner> m_runner;
  std::vector<TokenId> m_system_prompt;
  std::vector<Chat> m_chats;
  mutable std::vector<std::vector<std::vector<TokenId>>> m_last_prompts;  // written by each launch
  DeviceBuffer<std::int32_t> m_inputs;  // system prompt and user messages, for the harness's input hash
  DeviceBuffer<std::int32_t> m_tokens;
  double m_params = 0;
  double m_distinct_tokens = 0;  // system prompt + every user message and answer, once (the same for every seed)
};

}  // namespace aisp::serving::prefix_cache_ladder
