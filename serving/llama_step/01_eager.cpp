// ch16:llama_step:01_eager — the runner launches a step kernel by kernel.
//
// What it is: LlamaRunner::step() as the engine calls it: the step's metadata built and copied up, then
// per layer an RMSNorm, the fused QKV GEMM (cuBLASLt), RoPE + the K/V write, the attention kernels, the
// output projection, a residual add + RMSNorm, the gate/up GEMM, SwiGLU and the down GEMM (about twelve
// launches per layer with cuBLASLt's split-K reductions: 388 for the 8B shape at batch 1), then the
// lm_head GEMM and argmax, the ids copied back.
// Where it loses: at small decode batches each kernel runs for a few microseconds and the host queues the
// next one no faster; the GPU idles between launches (ch12:graphs measures the same effect in isolation).
// Run: aisp bench run --targets ch16:llama_step:01_eager
#include "serving/llama_step/problem.hpp"

namespace aisp::serving::llama_step::v01 {

AISP_REGISTER_STATEFUL_VARIANT(LlamaStepProblem, RunnerStep<false>, .step = 1, .slug = "eager",
                               .kind = VariantKind::baseline,
                               .summary = "the runner's step, every kernel launched from the host");

}  // namespace aisp::serving::llama_step::v01
