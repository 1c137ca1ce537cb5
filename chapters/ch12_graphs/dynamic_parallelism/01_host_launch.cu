// ch12:dynamic_parallelism:01_host_launch — a parent kernel decides each cell's samples, the host reads
// the decisions back and launches one child grid per cell (the baseline).
//
// What: per launch, on the harness's stream: the decide kernel (one thread per cell writes its sample
// count), a memset of the integrals, a cudaMemcpyAsync of the counts into pinned host memory, and
// cudaStreamSynchronize; then the host loops over the cells and launches each cell's child grid
// (count / 1,024 blocks of 256 threads, 4 samples per thread; the block sums its samples and adds them
// to the cell's integral with one atomicAdd). It is how such code is first written: the launch
// configuration depends on data the device produced, so the host fetches it.
// Why it is slow: the host must wait for the decisions to cross PCIe before it can launch anything,
// then pays one host launch per cell (1,024 of them), and the children run one after another on the
// stream, most of them a handful of blocks that leave the GPU nearly empty (half the cells have at most
// 32 blocks).
// Napkin math: one round trip (`aisp hw peaks`, launch_roundtrip, of the order of 10 µs) plus cells x
// (one host launch, a few µs, or the child's own time when longer): milliseconds at 1,024 cells, against
// tens to a few hundred µs of arithmetic if the children could run side by side.
// Run: aisp bench run --targets ch12:dynamic_parallelism:01_host_launch
#include <string>

#include "chapters/ch12_graphs/dynamic_parallelism/problem.hpp"
#include "core/base/error.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::dynamic_parallelism::v01 {

// The parent's decision, one thread per cell (reference.hpp samples_of).
__global__ void decide_kernel(const float* __restrict__ r, int cells, std::int32_t* __restrict__ sizes) {
  const int cell = static_cast<int>(blockIdx.x) * k_parent_threads + static_cast<int>(threadIdx.x);
  if (cell < cells) sizes[cell] = samples_of(r[cell]);
}

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

class HostLaunch {
 public:
  HostLaunch() = default;
  HostLaunch(const HostLaunch&) = delete;
  HostLaunch& operator=(const HostLaunch&) = delete;

  // Pinned, so the read-back is a direct DMA, as a careful first version would have it.
  void setup(const Args& a, cudaStream_t /*stream*/) {
    m_sizes_host = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(a.cells));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const int parent_blocks = (a.cells + k_parent_threads - 1) / k_parent_threads;
    decide_kernel<<<parent_blocks, k_parent_threads, 0, stream>>>(a.r, a.cells, a.sizes);
    AISP_CHECK_LAUNCH();
    AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float) * static_cast<std::size_t>(a.cells), stream));
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_sizes_host.data(), a.sizes,
                                    sizeof(std::int32_t) * static_cast<std::size_t>(a.cells),
                                    cudaMemcpyDeviceToHost, stream));
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int cell = 0; cell < a.cells; ++cell) {
      const std::int32_t n = m_sizes_host.data()[cell];
      if (n < k_base_samples || n > k_max_samples || n % k_base_samples != 0) {
        throw DataError("ch12:dynamic_parallelism: cell " + std::to_string(cell) + " got an invalid sample count " +
                        std::to_string(n));
      }
      integrate_child_kernel<<<n / k_base_samples, k_child_threads, 0, stream>>>(a.r, cell, n, a.out);
      AISP_CHECK_LAUNCH();
    }
  }

 private:
  PinnedBuffer<std::int32_t> m_sizes_host;
};

AISP_REGISTER_STATEFUL_VARIANT(DynamicParallelismProblem, HostLaunch, .step = 1, .slug = "host_launch",
                               .kind = VariantKind::baseline,
                               .summary = "decide on the device, read the sizes back, one host launch per cell");

}  // namespace aisp::ch12::dynamic_parallelism::v01
