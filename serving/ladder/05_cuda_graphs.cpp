// ch16:serving:05_cuda_graphs — decode steps replayed from CUDA graphs.
//
// What changed: the scheduler is step 04's; the runner now replays every decode-only step (each sequence
// one new token) from a CUDA graph captured once per shape: batches padded to a bucket of sequences (1,
// 2, 4, 8, then multiples of 8) and block tables to a power-of-two width, so that one graph serves every
// batch of its shape (LlamaRunner::graph_step, docs/serving-runner.md "CUDA graphs"). Steps with prompt
// tokens still launch kernel by kernel.
// Why it helps: a decode step of a small batch is a few hundred short kernels (about nine per layer, a
// few microseconds each) that the host launches one by one; the GPU finishes each before the host has
// queued the next, so the step is bound by launch latency, not by reading the weights. One graph launch
// submits them all at once.
// What it costs: padding rows (a batch of 5 computes 8), one eager run and a capture per new shape (made
// outside the measurement: setup serves the workload once), and the graphs' memory. Prefill-heavy steps
// gain nothing.
// Run: aisp bench run --targets ch16:serving:05_cuda_graphs
#include "serving/ladder/problem.hpp"

namespace aisp::serving::ladder::v05 {

void configure(SchedulerConfig& c) {
  c.policy = SchedulingPolicy::continuous;
  c.kv_mode = KvMode::paged;
  c.chunked_prefill = true;
}

class CudaGraphs final : public EngineStep {
 public:
  CudaGraphs() : EngineStep(&configure, /*cuda_graphs=*/true) {}
};

AISP_REGISTER_STATEFUL_VARIANT(ServingProblem, CudaGraphs, .step = 5, .slug = "cuda_graphs",
                               .kind = VariantKind::optimized,
                               .summary = "step 04's scheduler, decode steps replayed from CUDA graphs captured "
                                          "per (batch, context) bucket");

}  // namespace aisp::serving::ladder::v05
