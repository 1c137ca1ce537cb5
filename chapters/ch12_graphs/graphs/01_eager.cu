// ch12:graphs:01_eager — K kernel launches per step, one per kernel of the chain (the baseline).
//
// What: the chain as anyone writes it first: a loop over the K steps, each a <<<>>> launch on the stream,
// its pointers and step index passed as arguments. Nothing waits: the launches queue on the stream and the
// device runs them in order.
// Why it is slow: each cudaLaunchKernel costs the host a few microseconds (argument packing, the driver's
// bookkeeping, a write into the stream's push buffer), and each kernel does well under a microsecond of
// work, so the host cannot keep the device fed: the step takes about K launch costs, whatever the GPU.
// Napkin math: K = 128 launches at the measured back-to-back launch cost (`aisp hw peaks`, ceiling
// launch_kernel, a few µs on Hopper with a recent driver) is a few hundred µs per step, against 128 x
// 64 KiB of L2 traffic that takes tens of µs.
// Run: aisp bench run --targets ch12:graphs:01_eager
#include "chapters/ch12_graphs/graphs/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::graphs::v01 {

__global__ void chain_step_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                  const float* __restrict__ scale, const float* __restrict__ shift, int k,
                                  int n) {
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = fmaf(scale[k], src[i], shift[k]);
}

void launch(const Args& a, cudaStream_t stream) {
  const int blocks = (a.n + k_threads - 1) / k_threads;
  for (int k = 0; k < a.kernels; ++k) {
    chain_step_kernel<<<blocks, k_threads, 0, stream>>>(step_src(a, k), step_dst(a, k), a.scale, a.shift, k,
                                                        a.n);
    AISP_CHECK_LAUNCH();
  }
}

AISP_REGISTER_VARIANT(GraphsProblem, launch, .step = 1, .slug = "eager", .kind = VariantKind::baseline,
                      .summary = "K <<<>>> launches per step, one per kernel of the chain");

}  // namespace aisp::ch12::graphs::v01
