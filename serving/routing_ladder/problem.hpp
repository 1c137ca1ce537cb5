// ch17:routing — several engines behind `aisp route` (serving/router.hpp): which backend gets each
// request, with prefix caching on in every engine. Two engines, one per GPU (this device and the next),
// each behind its own HTTP server on a loopback port, a Router in front with the step's policy, and the
// load generator's client (run_load) sending the workload through the router: exactly the path of
// `aisp serve` x 2 + `aisp route` + `aisp loadgen`, in one process. Only the router's policy changes
// between steps.
//
// Workload (serving/routed_cluster.hpp, TenantWorkloadSpec): `requests` requests from `tenants`
// applications, each with its own system prompt (`system` tokens); a request is its tenant's system
// prompt and a user message (uniform in [user/8, user] tokens), and generates max_tokens (uniform in
// [output/8, output], all generated: ignore_eos). Tenants are drawn uniformly. Arrivals are Poisson at
// `rate` per second with at most `concurrency` requests in flight (run_load's client queue holds the
// rest, as vLLM's benchmark with --max-concurrency): the rate saturates one engine, so the cap binds and
// the makespan measures what the cluster serves under each policy, while TTFT and TPOT stay those of
// `concurrency` requests in flight instead of a queue that grows with the run. The shape of the workload
// and the arrival times come from fixed seeds (every step and every seed serves the same), the ids from
// the run's seed.
//
// Clock: wall, hot. One launch serves the whole workload through fresh EngineLoops (empty prefix caches:
// a cache warm from the previous launch would make every prompt a hit) over the problem's two
// LlamaRunners, with ch16:serving's fastest settings (continuous batching, paged KV, chunked prefill,
// CUDA-graph decode steps) and prefix caching on. The servers and the router live across launches (the
// servers in the problem, the router in the variant): their start-up is no part of what a policy costs.
// The time is the makespan (first send to last response). Facts per step, from its last launch (the
// harness reads them again after the timed ones): goodput under the SLO (axes
// ttft_slo_ms, tpot_slo_ms: requests within both per second of makespan), TTFT and TPOT p50/p99 (client
// clock, from send), requests and prefix-cache hit rate per engine, the mean number of engines a
// tenant's requests went to, evictions and preemptions per engine.
//
// Gate: every request completes with exactly its max_tokens ids, as the client received them through
// the router; every id is judged by the teacher-forced rule (serving/gpu/judge.hpp) on this device's
// runner (both runners hold the same weights).
//
// Declared work: 2 x parameters x the distinct tokens (each system prompt once, every user message and
// output once), bf16: the least any cluster must compute, the same for every step. A floor: a step that
// computes a system prompt on both engines, or again after evicting it, does more than it declares.
//
// Needs two GPUs: every step declares "multi_gpu" (SKIPPED on one GPU) and "peer_gpu" (the second
// engine's kernels run on the next GPU, which the audit accepts).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/ladder.hpp"
#include "serving/gpu/two_gpu_cluster.hpp"
#include "serving/routed_cluster.hpp"

namespace aisp::serving::routing_ladder {

struct Args {
  gpu::TwoGpuCluster* gpus = nullptr;  // the runners, the servers, the workload, the outputs
  int max_running = 0;                 // per engine
  LoadSpec load;
  RoutingSlo slo;
  PrefixPolicyOptions prefix;
};

// One launch through `router`: fresh engines on both runners, the workload through the router, the
// outputs to a.tokens on `stream`. Throws if a request fails or ends short of its max_tokens.
RoutingFacts serve_routed(const Args& a, const Router& router, cudaStream_t stream);
std::vector<Fact> step_facts(const RoutingFacts& f, const Args& a);

// What every step does; a step only names its policy.
class RoutedStep {
 public:
  explicit RoutedStep(std::string policy) : m_policy(std::move(policy)) {}
  // Starts the router and serves the workload once: the decode graphs of the shapes it meets are
  // captured here, outside the timed launches.
  void setup(const Args& a, cudaStream_t stream);
  void launch(const Args& a, cudaStream_t stream) { m_last = serve_routed(a, *m_router, stream); }
  std::vector<Fact> facts(const Args& a) { return step_facts(m_last, a); }

 private:
  std::string m_policy;
  std::unique_ptr<Router> m_router;
  RoutingFacts m_last;
};

class RoutingProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info();
  RoutingProblem();
  ~RoutingProblem() override;

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
  PrefixPolicyOptions m_prefix;
  std::unique_ptr<gpu::TwoGpuCluster> m_gpus;
};

}  // namespace aisp::serving::routing_ladder
