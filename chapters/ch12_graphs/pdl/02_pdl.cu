// ch12:pdl:02_pdl — the same two kernels, the consumer launched as a programmatic dependent of the producer.
//
// What changed: the consumer is launched with cudaLaunchKernelEx and the launch attribute
// cudaLaunchAttributeProgrammaticStreamSerialization = 1, which relaxes the stream dependency on the
// producer: the consumer may be scheduled once every producer block has executed
// griddepcontrol.launch_dependents (or exited), instead of once the producer has completed. The producer
// executes it first thing; the consumer loads its w and b (the prologue, which does not read y) and then
// executes griddepcontrol.wait, which blocks until the producer grid has completed and its writes are
// visible, before it reads y. Kernels, geometry and arithmetic are step 01's.
// References: PTX ISA, "Parallel Synchronization and Communication Instructions: griddepcontrol" (PTX 7.8,
// sm_90+); CUDA C++ Programming Guide, "Programmatic Dependent Launch and Synchronization".
// Why it helps: the consumer's launch, its blocks' distribution to the SMs and its prologue's DRAM round
// trip overlap the producer's last blocks instead of following them. The producer's blocks take half of
// each SM's threads (problem.hpp), so the consumer's blocks fit beside them. The wait keeps correctness:
// no y is read before the whole producer grid is done.
// Napkin math: at most the gap between the kernels of step 01 is saved (a few µs on a pair of ~2 µs
// kernels); the bytes are unchanged, so larger sizes shrink the gain as a fraction.
// Run: aisp bench run --targets ch12:pdl:02_pdl
#include "chapters/ch12_graphs/pdl/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::pdl::v02 {

// Both instructions exist from sm_90 on. The variant declares min_cc 90, so the harness never runs it on
// older GPUs; a build for an older architecture compiles the guards below instead.
__device__ __forceinline__ void allow_dependents_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The "memory" clobber keeps the compiler from moving the y loads above the wait.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap();  // without the wait the consumer would race the producer: fail loudly, never silently
#endif
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

__global__ void silu_kernel(const float4* __restrict__ x, float4* __restrict__ y, std::size_t n4) {
  // First: the consumer may be scheduled as soon as every block of this grid got here. Its reads of y
  // still wait for this whole grid to complete (griddepcontrol.wait), so signalling early is safe.
  allow_dependents_to_launch();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    y[i] = make_float4(silu(v.x), silu(v.y), silu(v.z), silu(v.w));
  }
}

// y carries no __restrict__: this kernel runs while the producer may still be writing it, so its loads
// stay on the ordinary coherent path (and, after the wait, see the producer's writes).
__global__ void scale_bias_kernel(const float4* y, const float4* __restrict__ w, const float4* __restrict__ b,
                                  float4* __restrict__ out, int rows, int groups) {
  const int g = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  // Prologue: this thread's 4 columns of scale and bias, independent of the producer, loaded while it
  // may still be running.
  const float4 wv = w[g];
  const float4 bv = b[g];
  wait_for_prerequisite_grids();
  for (int r = static_cast<int>(blockIdx.y); r < rows; r += static_cast<int>(gridDim.y)) {
    const std::size_t i = static_cast<std::size_t>(r) * groups + g;
    const float4 v = y[i];
    out[i] = make_float4(fmaf(v.x, wv.x, bv.x), fmaf(v.y, wv.y, bv.y), fmaf(v.z, wv.z, bv.z),
                         fmaf(v.w, wv.w, bv.w));
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const std::size_t n4 = static_cast<std::size_t>(a.rows) * static_cast<std::size_t>(a.cols) / 4;
  silu_kernel<<<producer_blocks(a), k_threads, 0, stream>>>(reinterpret_cast<const float4*>(a.x),
                                                           reinterpret_cast<float4*>(a.y), n4);
  AISP_CHECK_LAUNCH();

  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = consumer_grid(a);
  config.blockDim = dim3(k_threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, scale_bias_kernel, reinterpret_cast<const float4*>(a.y),
                                     reinterpret_cast<const float4*>(a.w), reinterpret_cast<const float4*>(a.b),
                                     reinterpret_cast<float4*>(a.out), a.rows, a.cols / 4));
}

AISP_REGISTER_VARIANT(PdlProblem, launch, .step = 2, .slug = "pdl", .kind = VariantKind::optimized,
                      .summary = "consumer launched with programmatic stream serialization: prologue overlaps "
                                 "the producer, griddepcontrol.wait before reading y",
                      .min_cc = 90);

}  // namespace aisp::ch12::pdl::v02
