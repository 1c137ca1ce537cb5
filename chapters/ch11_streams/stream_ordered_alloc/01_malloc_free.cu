// ch11:stream_ordered_alloc:01_malloc_free — cudaMalloc the temporaries, run the kernels, cudaFree them, on
// every step (the baseline).
//
// What: two cudaMalloc calls (n floats each), three kernels on the harness's stream (affine into t1,
// leaky_relu into t2, gate into out), two cudaFree calls. It is the obvious code for "this step needs
// scratch", and it is correct without any thought about streams: cudaFree does not return until the GPU
// is done with everything queued, so the kernels cannot lose their temporaries mid-flight.
// Why it is slow: that safety is the cost. cudaMalloc asks the driver (and the OS, for fresh pages) for
// memory; cudaFree synchronizes the whole device before giving it back (CUDA Programming Guide,
// "Stream-Ordered Memory Allocator"). So every step pays two driver allocations, a full drain of the GPU
// and two releases, and the host cannot queue step k+1 while step k runs: each step's ~microseconds of
// kernels sit between tens of microseconds of host calls, with the GPU idle during them.
// Napkin math: the kernels move 28n bytes = 29 MB per step at the default n = 2^20, a few microseconds from
// L2; the allocation calls cost tens of microseconds each, plus one launch + synchronize round trip (the
// measured "launch_roundtrip" ceiling of aisp hw peaks): the step is host-bound many times over.
// Run: aisp bench run --targets ch11:stream_ordered_alloc:01_malloc_free
#include "chapters/ch11_streams/stream_ordered_alloc/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::stream_ordered_alloc::v01 {

constexpr int k_threads = 256;

__global__ void affine_kernel(const float* __restrict__ x, float* __restrict__ t1, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) t1[i] = __fmaf_rn(k_scale, x[i], k_shift);
}

__global__ void leaky_relu_kernel(const float* __restrict__ t1, float* __restrict__ t2, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) {
    const float t = t1[i];
    t2[i] = t > 0.0f ? t : __fmul_rn(k_slope, t);
  }
}

__global__ void gate_kernel(const float* __restrict__ t2, const float* __restrict__ x, float* __restrict__ out,
                            std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(t2[i], x[i]);
}

void launch(const Args& a, cudaStream_t stream) {
  const std::size_t bytes = a.n * sizeof(float);
  float* t1 = nullptr;
  float* t2 = nullptr;
  AISP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&t1), bytes));
  AISP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&t2), bytes));
  const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
  affine_kernel<<<blocks, k_threads, 0, stream>>>(a.x, t1, a.n);
  AISP_CHECK_LAUNCH();
  leaky_relu_kernel<<<blocks, k_threads, 0, stream>>>(t1, t2, a.n);
  AISP_CHECK_LAUNCH();
  gate_kernel<<<blocks, k_threads, 0, stream>>>(t2, a.x, a.out, a.n);
  AISP_CHECK_LAUNCH();
  // Each cudaFree waits for the device to finish what is queued, the kernels above included.
  AISP_CUDA_CHECK(cudaFree(t1));
  AISP_CUDA_CHECK(cudaFree(t2));
}

AISP_REGISTER_VARIANT(StreamOrderedAllocProblem, launch, .step = 1, .slug = "malloc_free",
                      .kind = VariantKind::baseline,
                      .summary = "cudaMalloc two temporaries, three kernels, cudaFree: the device syncs per step");

}  // namespace aisp::ch11::stream_ordered_alloc::v01
