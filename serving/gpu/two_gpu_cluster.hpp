// What the two-GPU serving ladders (ch17:routing, ch15:disaggregated) share, owned once: one model loaded
// into two LlamaRunners, on the harness's device and the next; the loopback servers their engines sit
// behind (serving/routed_cluster.hpp); the seeded tenant workload with its prompts and each launch's
// outputs in device memory, for the harness's input hash and gate; the teacher-forced judge; the
// declared work. A ladder's problem owns one and adds only its own axes, engines and facts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/axes.hpp"
#include "core/base/device_facts.hpp"
#include "device/buffer.hpp"
#include "device/ladder.hpp"
#include "serving/gpu/llama_runner.hpp"
#include "serving/routed_cluster.hpp"
#include "serving/scheduler.hpp"

namespace aisp::serving::gpu {

// An axis value as an int; aisp::UsageError naming the target and the axis when it is above `most`.
int narrow_axis(const AxisValues& axes, std::string_view target, const char* name, std::int64_t most);

// The load every two-GPU ladder sends, from its `rate` and `concurrency` axes: the arrival times from a
// fixed seed (every step and every seed of a run see the same schedule), and a request timeout of 90 s, so
// that a request stuck that long fails the launch with its index and the client's error before the
// harness gives up on a worker silent for 120 s (RoutedCluster's StallWatch says meanwhile which engine
// held what).
LoadSpec load_from_axes(const AxisValues& axes, std::string_view target);
// The goodput SLO, from the `ttft_slo_ms` and `tpot_slo_ms` axes.
RoutingSlo slo_from_axes(const AxisValues& axes, std::string_view target);

struct TwoGpuClusterSpec {
  std::string target;           // "ch17:routing": messages, the served model's name, the model cache
  std::string preset;           // ladder_model_preset(model axis)
  TenantWorkloadSpec workload;  // vocab and first_id come from the model
  int kv_blocks = 0;            // KV-cache blocks of 16 tokens, per runner
  int token_budget = 0;         // tokens per engine step (the runners' max_batched_tokens)
  int max_running = 1;          // sequences per engine step: the largest decode graph captured up front
  int concurrency = 0;          // the load's cap (0: none): the servers' and router's connection threads
};

class TwoGpuCluster {
 public:
  static constexpr int k_block_size = 16;

  // Checks that the pool holds one request (aisp::UsageError otherwise). On a machine with two GPUs or
  // more it loads the model on `device` and on the next GPU (CUDA-graph decode steps: ch16:serving's
  // fastest engine), captures every decode graph a step of up to max_running sequences can need on both
  // (LlamaRunner::capture_graphs: no launch captures one, audited or not) and starts the servers; with
  // one GPU it loads nothing (every step is SKIPPED before it runs) and only the buffers exist.
  TwoGpuCluster(TwoGpuClusterSpec spec, const DeviceFacts& device);
  ~TwoGpuCluster();  // the peer's runner released with the peer current
  TwoGpuCluster(const TwoGpuCluster&) = delete;
  TwoGpuCluster& operator=(const TwoGpuCluster&) = delete;

  // The workload's ids from `seed`, and the prompts copied for the input hash. Nothing with one GPU.
  void generate(std::uint64_t seed, cudaStream_t stream);
  [[nodiscard]] std::vector<TensorView> inputs() const;   // the prompts, concatenated
  [[nodiscard]] std::vector<TensorView> outputs() const;  // [request][output_max]: its ids, then -1
  // 2 x parameters x the workload's distinct tokens, bf16: the least any cluster computes for it.
  [[nodiscard]] Work work() const;
  // Every request's ids within [0, vocab) and exactly its max_tokens of them, each judged by the
  // teacher-forced rule (judge.hpp) on this device's runner (both hold the same weights). No engine may
  // own the runner's KV blocks then: the judge uses them as scratch.
  [[nodiscard]] std::string judge(cudaStream_t stream);

  // A launch's parts. runner(0) is this device's, runner(1) the next GPU's.
  [[nodiscard]] LlamaRunner& runner(int i) { return *m_runners.at(static_cast<std::size_t>(i)); }
  [[nodiscard]] RoutedCluster& servers() { return *m_servers; }
  [[nodiscard]] const TenantWorkload& workload() const { return m_workload; }
  // An engine's scheduler for this workload: `max_running`, the token budget, 16-token blocks, and a
  // queue no request of the workload is refused from.
  [[nodiscard]] SchedulerConfig engine_config(int max_running) const;
  // After a launch (its engines destroyed): throws std::runtime_error naming `step` when a request did
  // not complete with its max_tokens, else writes the ids the client received to the outputs.
  void store_outputs(const ClusterRun& run, std::string_view step, cudaStream_t stream);

 private:
  TwoGpuClusterSpec m_spec;
  int m_peer = 0;
  std::vector<std::unique_ptr<LlamaRunner>> m_runners;  // empty with one GPU
  std::unique_ptr<RoutedCluster> m_servers;
  TenantWorkload m_workload;
  DeviceBuffer<std::int32_t> m_inputs;
  DeviceBuffer<std::int32_t> m_tokens;
  double m_params = 0;
  double m_distinct_tokens = 0;
};

}  // namespace aisp::serving::gpu
