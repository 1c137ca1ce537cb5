// ch16:llama_step:02_cuda_graphs — a decode step replayed from a CUDA graph.
//
// What changed: RunnerOptions::cuda_graphs. The step's launches were captured once for its shape (batch
// padded to a bucket, block table to a power-of-two width: LlamaRunner::graph_step) and are submitted as
// one graph; the metadata copy and the ids' copy back stay outside it.
// Why it helps: the launches reach the GPU back to back, so a small batch's step is bound by reading the
// weights instead of by the host.
// Where it does not: a prefill step (new_tokens > 1) is not captured (its shapes vary with every prompt
// and its kernels are long), so it runs as 01 does; at large batches the GEMMs dominate and the launch
// gaps hide behind them. Padding rows cost a little at batch sizes between buckets.
// Run: aisp bench run --targets ch16:llama_step:02_cuda_graphs
#include "serving/llama_step/problem.hpp"

namespace aisp::serving::llama_step::v02 {

AISP_REGISTER_STATEFUL_VARIANT(LlamaStepProblem, RunnerStep<true>, .step = 2, .slug = "cuda_graphs",
                               .kind = VariantKind::optimized,
                               .summary = "decode steps replayed from a CUDA graph captured per shape");

}  // namespace aisp::serving::llama_step::v02
