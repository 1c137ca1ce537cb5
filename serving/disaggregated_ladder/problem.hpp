// ch15:disaggregated — prefill/decode disaggregation in the serving engine (serving/disaggregated.hpp):
// two GPUs serve the same workload either as two colocated engines, each prefilling and decoding its own
// requests, or as one disaggregated engine that prefills on this GPU and decodes on the next, moving
// each sequence's KV blocks between them (LlamaRunner::copy_kv_blocks_from, ch15:kv_transfer step 03's
// kernel). Only the layout changes between steps.
//
// Both steps go through the same path: two loopback HTTP servers, `aisp route`'s router in front with
// round robin, and the load generator's client (serving/routed_cluster.hpp, shared with ch17:routing).
// Colocated, each server holds its own engine; disaggregated, both hold the one disaggregated engine,
// so the router and the servers cost the same in both steps.
//
// Workload (serving/routed_cluster.hpp, TenantWorkloadSpec with one tenant and no system prompt):
// `requests` requests, prompts uniform in [input/8, input] tokens, max_tokens uniform in [output/8,
// output] (all generated: ignore_eos). Arrivals are Poisson at `rate` per second, at most `concurrency`
// in flight. The shape and the arrival times come from fixed seeds (every step and seed serves the same),
// the ids from the run's seed.
//
// Clock: wall, hot. One launch serves the whole workload through fresh engines over the problem's two
// LlamaRunners, with ch16:serving's fastest settings (continuous batching, paged KV, chunked prefill,
// CUDA-graph decode steps), prefix caching off. The time is the makespan (first send to last response).
// Facts per step, from its last launch (the harness reads them again after the timed ones): goodput under the SLO (axes ttft_slo_ms, tpot_slo_ms), TTFT and TPOT p50/p99 (client clock),
// steps and preemptions per GPU, and for the disaggregated step the hand-offs.
//
// Gate: every request completes with exactly its max_tokens ids, and every id is judged by the
// teacher-forced rule (serving/gpu/judge.hpp) on this device's runner (both hold the same weights): a
// block that did not arrive, or arrived in the wrong place, changes the decode's logits and fails here.
//
// Declared work: 2 x parameters x the prompt and output tokens, bf16, the same for both steps (the K/V
// move is bytes over the link, not FLOPs).
//
// Needs two GPUs: every step declares "multi_gpu" (SKIPPED on one GPU) and "peer_gpu" (the second
// runner's kernels run on the next GPU, which the audit accepts).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device/ladder.hpp"
#include "serving/gpu/two_gpu_cluster.hpp"
#include "serving/routed_cluster.hpp"

namespace aisp::serving::disaggregated_ladder {

enum class Layout { colocated, disaggregated };

struct Args {
  gpu::TwoGpuCluster* gpus = nullptr;  // the runners, the servers, the workload, the outputs
  int max_running = 0;                 // per engine
  LoadSpec load;
  RoutingSlo slo;
};

// What a launch learned, beside the client's records.
struct LayoutFacts {
  RoutingFacts routing;                  // the summary (goodput, TTFT, TPOT) over the records
  std::int64_t steps[2] = {0, 0};        // per GPU: [0] this device, [1] the next
  std::int64_t preemptions[2] = {0, 0};
  std::int64_t requests[2] = {0, 0};     // colocated: per engine; disaggregated: prefilled / decoded
  std::int64_t handoffs = 0;             // disaggregated only
  int graphs_captured = 0;               // decode graphs captured during the launch: 0 (all at set-up)
};

// One launch: fresh engines in `layout` behind the cluster's servers, the workload through `router`,
// the outputs to a.tokens on `stream`. Throws if a request fails or ends short of its max_tokens.
LayoutFacts serve_layout(const Args& a, const Router& router, Layout layout, cudaStream_t stream);
std::vector<Fact> step_facts(const LayoutFacts& f, const Args& a, Layout layout);

// What every step does; a step only names its layout.
class LayoutStep {
 public:
  explicit LayoutStep(Layout layout) : m_layout(layout) {}
  // Starts the router and serves the workload once: the decode graphs of the shapes it meets are
  // captured here, outside the timed launches.
  void setup(const Args& a, cudaStream_t stream);
  void launch(const Args& a, cudaStream_t stream) { m_last = serve_layout(a, *m_router, m_layout, stream); }
  std::vector<Fact> facts(const Args& a) { return step_facts(m_last, a, m_layout); }

 private:
  Layout m_layout;
  std::unique_ptr<Router> m_router;
  LayoutFacts m_last;
};

class DisaggregatedProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  DisaggregatedProblem();
  ~DisaggregatedProblem() override;

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
  int m_max_running = 0;
  LoadSpec m_load;
  RoutingSlo m_slo;
  std::unique_ptr<gpu::TwoGpuCluster> m_gpus;
};

}  // namespace aisp::serving::disaggregated_ladder
