// ch16:serving — the contract of the serving ladder: one model, one workload, engine configurations as
// steps. Every step serves the same seeded requests (varied prompt and output lengths, greedy, ignore_eos)
// through an EngineLoop over the same LlamaRunner; what changes is the scheduler: how batches form, how
// KV memory is held, how prompts share steps with decodes. This ladder lives in the serving layer (it
// uses the engine; no chapter may), its README and expectations in chapters/ch16_production_inference/
// serving/.
//
// Clock: wall, hot (docs/measurement.md "Two clocks"). The subject is the whole engine: scheduling on the
// host, steps on the GPU, the waits between them. One launch submits every request, waits for the last
// token, and copies the tokens to the output on the harness's stream: the time is the workload's makespan,
// the number a serving benchmark reports as request throughput (requests / time).
//
// Model: random weights of a published shape (axis model: 0 = the "tiny" preset, 1 = Llama-3.2-1B,
// 8 = Llama-3-8B), written once to $AISP_CACHE_DIR/models (serving/model_writer.hpp; 2.5 GB for the 1B
// shape, 16 GB for 8B) and uploaded once per worker. KV memory is an axis (kv_blocks of 16 tokens) so that
// memory, not only compute, binds: at the defaults the requests need ~1,500 blocks in all and the pool
// holds 1,024.
//
// Gate: the tokens are judged by teacher forcing (serving/ladder_workload.hpp), not compared with one
// fixed reference: each generated token must be the model's best token given the engine's own prefix, or
// within a near-tie tolerance of it, as the runner's prefill path computes the logits. The problem has no
// references(); judge_outputs() does the checking.
//
// Declared work: 2 x parameters FLOPs per token computed (prompt and generated), bf16: the MFU of the
// makespan. Attention FLOPs and the KV reads are left out (a few % at these lengths): the number is a
// floor on the work, never inflated.
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
#include "serving/ladder_workload.hpp"
#include "serving/model_weights.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving::ladder {

// What every step receives. The runner and the requests belong to the problem; `tokens` is the output.
struct Args {
  LlamaRunner* runner = nullptr;
  const std::vector<GenerationRequest>* requests = nullptr;
  std::int32_t* tokens = nullptr;  // device: requests x max_new, each row's generated tokens then -1
  int max_new = 0;                 // the longest max_tokens of the workload's distribution
  int max_running = 0;             // sequences per batch
  int token_budget = 0;            // tokens per engine step
};

// The scheduler settings every step shares; each step overrides what its idea changes.
SchedulerConfig base_scheduler_config(const Args& a);

// One launch: submits every request to `engine`, waits for all of them to finish, and copies the tokens to
// a.tokens on `stream`. Throws (the variant then ends in ERROR) if a request is refused or ends other than
// by reaching max_tokens.
void serve_all(const Args& a, EngineLoop& engine, cudaStream_t stream);

// The engine a step owns: its own EngineLoop (thread, scheduler, block manager) over the shared runner.
// Only one engine runs at a time (launches do not overlap), so the engines share the runner's KV pool.
class EngineStep {
 public:
  // cuda_graphs: the runner replays decode steps from CUDA graphs while this step's engine runs (the
  // steps share one runner; each sets the mode at every launch).
  explicit EngineStep(void (*configure)(SchedulerConfig&), bool cuda_graphs = false)
      : m_configure(configure), m_cuda_graphs(cuda_graphs) {}
  void setup(const Args& a, cudaStream_t);
  void launch(const Args& a, cudaStream_t stream);
  // The scheduler's settings, and the engine steps and preemptions of the last launch.
  std::vector<Fact> facts(const Args& a);

 private:
  void (*m_configure)(SchedulerConfig&);
  bool m_cuda_graphs = false;
  std::unique_ptr<EngineLoop> m_engine;
  GraphStats m_last_graphs;
  std::int64_t m_last_steps = 0;
  std::int64_t m_last_preemptions = 0;
};

class ServingProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  ServingProblem();
  ~ServingProblem() override;

  void allocate(const AxisValues& axes, const DeviceFacts& device) override;
  void generate(std::uint64_t seed, cudaStream_t stream) override;
  std::vector<TensorView> inputs() const override;
  std::vector<TensorView> outputs() const override;
  std::vector<TensorView> references() const override { return {}; }
  Tolerance tolerance() const override { return {0, 0}; }  // unused: judge_outputs decides
  Work work() const override;
  Args args() const override { return m_args; }
  std::string judge_outputs(cudaStream_t stream) override;

 private:
  LadderWorkloadSpec m_spec;
  std::unique_ptr<ModelWeights> m_weights;
  std::unique_ptr<LlamaRunner> m_runner;
  std::vector<GenerationRequest> m_requests;
  DeviceBuffer<std::int32_t> m_prompts;  // the prompts, concatenated: the input the harness hashes
  DeviceBuffer<std::int32_t> m_tokens;
  double m_params = 0;
  Args m_args{};
};

}  // namespace aisp::serving::ladder
