// ch12:dynamic_parallelism:02_device_launch — each parent thread launches its cell's child grid itself
// (CUDA dynamic parallelism).
//
// What changed: the read-back, the synchronize and the host loop are gone. One parent kernel, one thread
// per cell: the thread decides the cell's samples (as step 01's decide kernel), writes the count, zeroes
// the cell's integral, and launches step 01's child kernel with the same grid into the per-grid
// fire-and-forget stream (cudaStreamFireAndForget). The host makes one launch per solve.
// References: CUDA C++ Programming Guide, "CUDA Dynamic Parallelism" (CDP2, the only version on compute
// capability 9.0 and later): "Parent and Child Grids" (a parent grid completes only after all its
// children, which is what keeps the children inside the harness's stream order), "Named Streams"
// (cudaStreamFireAndForget: independent children, free to run side by side; cudaStreamTailLaunch would
// run them after the parent, one after another), "Memory Coherence and Consistency" (the parent thread's
// writes before the launch, the zeroed integral here, are visible to the child), and "Compiling and
// Linking" (relocatable device code, -rdc=true, linked against cudadevrt: CMakeLists.txt builds this file
// alone so). No cudaDeviceSynchronize in device code: CDP2 removed it, and nothing here needs it.
// Why it helps: no PCIe round trip and no host in the loop; the launches are issued by 1,024 device
// threads at once, and the children, in separate streams, run concurrently, so the small ones share the
// GPU instead of each holding it alone in turn.
// Napkin math: one host launch + the device-side launches (issued in parallel) + the children's work
// spread over the whole GPU: tens to a few hundred µs at 1,024 cells, against step 01's milliseconds.
// Run: aisp bench run --targets ch12:dynamic_parallelism:02_device_launch
#include "chapters/ch12_graphs/dynamic_parallelism/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::dynamic_parallelism::v02 {

// One cell's midpoint rule: block b covers samples [b * 1,024, (b + 1) * 1,024), thread t the samples
// b * 1,024 + u * 256 + t, u = 0..3. The summation order is reference.hpp's k_serial_adds.
__global__ void __launch_bounds__(k_child_threads) integrate_child_kernel(const float* __restrict__ r, int cell,
                                                                          std::int32_t n, float* __restrict__ out) {
  __shared__ float warp_sums[k_child_threads / 32];
  const float s = exp2f(2.0f * r[cell]);
  const float inv_n = 1.0f / static_cast<float>(n);  // a power of two: exact
  const std::int32_t first =
      static_cast<std::int32_t>(blockIdx.x) * k_base_samples + static_cast<std::int32_t>(threadIdx.x);
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < k_samples_per_thread; ++u) {
    const float x = (static_cast<float>(first + u * k_child_threads) + 0.5f) * inv_n;  // abscissa()
    const float h = 1.0f / fmaf(s * x, x, 1.0f);                                       // integrand()
    sum = u == 0 ? h : sum + h;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = warp_sums[0];
#pragma unroll
    for (int w = 1; w < k_child_threads / 32; ++w) total += warp_sums[w];
    atomicAdd(out + cell, total * inv_n);  // exact scaling; the blocks' order is not fixed (tolerance)
  }
}

// The parent: one thread per cell decides, records and launches. A launch that fails (the device's
// pending-launch buffer full, problem.hpp) leaves the cell NaN, so the gate reports it.
__global__ void parent_kernel(const float* __restrict__ r, int cells, std::int32_t* __restrict__ sizes,
                              float* __restrict__ out) {
  const int cell = static_cast<int>(blockIdx.x) * k_parent_threads + static_cast<int>(threadIdx.x);
  if (cell >= cells) return;
  const std::int32_t n = samples_of(r[cell]);
  sizes[cell] = n;
  out[cell] = 0.0f;  // before the launch: visible to the child
  integrate_child_kernel<<<n / k_base_samples, k_child_threads, 0, cudaStreamFireAndForget>>>(r, cell, n, out);
  if (cudaGetLastError() != cudaSuccess) out[cell] = __int_as_float(0x7fc00000);  // quiet NaN
}

void launch(const Args& a, cudaStream_t stream) {
  const int parent_blocks = (a.cells + k_parent_threads - 1) / k_parent_threads;
  parent_kernel<<<parent_blocks, k_parent_threads, 0, stream>>>(a.r, a.cells, a.sizes, a.out);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(DynamicParallelismProblem, launch, .step = 2, .slug = "device_launch",
                      .kind = VariantKind::optimized,
                      .summary = "each parent thread launches its cell's child grid (CDP2, fire-and-forget "
                                 "stream)");

}  // namespace aisp::ch12::dynamic_parallelism::v02
