// ch11:overlap:01_serial — copy everything in, compute, copy everything out, one after the other (the
// baseline).
//
// What: one cudaMemcpyAsync of the whole input host -> device, one kernel over all n elements (one thread
// per element, `fmas` dependent FMAs each), one cudaMemcpyAsync of the whole output device -> host, all on
// the harness's stream. It is what anyone writes first, and with pinned buffers each piece already runs at
// full speed: the copies at the link's rate, the kernel at the FMA rate.
// Why it is slow: stream order makes each piece wait for the previous one. While the input crosses PCIe
// the SMs and the device -> host copy engine idle; while the kernel runs both links idle; while the output
// crosses, the SMs and the other direction idle. Time = copy in + compute + copy out.
// Napkin math (defaults: n = 2^27, 512 MiB each way; fmas = 1024): ~9.8 ms per direction at ~55 GB/s (PCIe
// Gen5 x16 with pinned buffers, the figure ch02:p2p_copy uses) and 2^27 x 2,048 FLOPs = 275 GFLOP, ~4 ms
// at the 67 TFLOP/s FP32 datasheet rate of an H100/H200 SXM: ~24 ms in all, against a bound of ~10 ms.
// Run: aisp bench run --targets ch11:overlap:01_serial
#include "chapters/ch11_streams/overlap/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::overlap::v01 {

constexpr int k_threads = 256;

// One element per thread. The fma chain is serial within a thread (each depends on the last, ~4 cycles
// apart), so the FMA pipes are kept busy by many warps per scheduler, not by one thread's ILP: a full SM
// has 16 per scheduler, four are enough to cover the latency.
__global__ void horner_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, int fmas) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc = 1.0f;
#pragma unroll 8
  for (int j = 0; j < fmas; ++j) acc = __fmaf_rn(acc, v, 1.0f);
  y[i] = acc;
}

void launch(const Args& a, cudaStream_t stream) {
  const std::size_t bytes = a.n * sizeof(float);
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.dev_in, a.host_in, bytes, cudaMemcpyHostToDevice, stream));
  const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
  horner_kernel<<<blocks, k_threads, 0, stream>>>(a.dev_in, a.dev_out, a.n, a.fmas);
  AISP_CHECK_LAUNCH();
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.host_out, a.dev_out, bytes, cudaMemcpyDeviceToHost, stream));
}

AISP_REGISTER_VARIANT(OverlapProblem, launch, .step = 1, .slug = "serial", .kind = VariantKind::baseline,
                      .summary = "whole buffer in, one kernel, whole buffer out, in stream order");

}  // namespace aisp::ch11::overlap::v01
