// ch16:llama_step — one forward step of the serving engine's Llama runner, measured against the physics
// of the step: a decode step reads every weight once (and each sequence's KV), so at small batches its
// floor is those bytes over the DRAM read ceiling; a long prefill is a chain of large GEMMs whose floor
// is the bf16 tensor ceiling (its MFU). Steps: the same runner launching kernel by kernel, then
// replaying decode steps from CUDA graphs (serving/gpu/llama_runner.hpp, RunnerOptions::cuda_graphs).
//
// The serving ladder (ch16:serving) measures whole workloads through the engine; this one isolates the
// step it is built of, so that the issue's per-step bounds ("decode at batch 1 within 15% of the DRAM-read
// bound", "prefill of 4096 tokens at >= 60% MFU") are read off one table with the harness's ceilings.
// It lives in the serving layer (it uses the runner; no chapter may), its README and expectations in
// chapters/ch16_production_inference/llama_step/.
//
// Clock: wall, hot. One launch = LlamaRunner::step() on a fixed batch: the metadata built on the host
// and copied up, the layers, the lm_head and argmax of each sequence's last token, the ids copied back
// and the stream synchronized: what the engine pays per step, host included (the graphs' subject is the
// host's launch cost). The batch re-runs at the same positions, so every launch writes the same K/V to
// the same slots and computes the same ids.
//
// Gate: each sequence's sampled token, teacher-forced (serving/ladder_workload.hpp, the per-token rule
// only): the best token of the runner's prefill path over the same tokens, or within the near-tie
// tolerance of it.
//
// Declared work (a floor: activations and the prefill kernel's re-reads of K/V are not counted):
//   flops = 2 x (layer matmul parameters) x tokens + 2 x lm_head parameters x sequences
//           + causal attention, 4 x heads x head_dim x (keys each new token attends to), per layer
//   bytes read = every weight the step multiplies by (layers, norms, lm_head) + the K/V of each
//           sequence's context; bytes written = the new tokens' K/V.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "device/buffer.hpp"
#include "device/ladder.hpp"
#include "serving/gpu/llama_runner.hpp"
#include "serving/model_weights.hpp"
#include "serving/runner_api.hpp"

namespace aisp::serving::llama_step {

struct Args {
  LlamaRunner* runner = nullptr;
  const StepBatch* batch = nullptr;  // the step every launch runs
  std::int32_t* ids = nullptr;       // device [sequences]: the sampled ids
};

// One launch: runner->step(*batch), the ids copied to a.ids on `stream`.
void run_step(const Args& a, cudaStream_t stream);

// Sets the runner's graph mode at setup and at every launch (the two steps share one runner).
template <bool Graphs>
class RunnerStep {
 public:
  void setup(const Args& a, cudaStream_t stream) { launch(a, stream); }  // captures before any timing
  void launch(const Args& a, cudaStream_t stream) {
    a.runner->set_cuda_graphs(Graphs);
    run_step(a, stream);
  }
  std::vector<Fact> facts(const Args& a);
};

class LlamaStepProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  LlamaStepProblem();
  ~LlamaStepProblem() override;

  void allocate(const AxisValues& axes, const DeviceFacts& device) override;
  void generate(std::uint64_t seed, cudaStream_t stream) override;
  std::vector<TensorView> inputs() const override;
  std::vector<TensorView> outputs() const override;
  std::vector<TensorView> references() const override { return {}; }
  Tolerance tolerance() const override { return {0, 0}; }  // unused: judge_outputs decides
  Work work() const override { return m_work; }
  Args args() const override { return {m_runner.get(), &m_batch, m_ids.data()}; }
  std::string judge_outputs(cudaStream_t stream) override;

 private:
  int m_batch_size = 0, m_context = 0, m_new = 0, m_scratch_blocks = 0;
  std::unique_ptr<LlamaRunner> m_runner;
  std::vector<std::vector<TokenId>> m_tokens;  // per sequence: context + new tokens
  StepBatch m_batch;
  DeviceBuffer<std::int32_t> m_input;  // the tokens, for the harness's input hash
  DeviceBuffer<std::int32_t> m_ids;
  Work m_work;
};

}  // namespace aisp::serving::llama_step
