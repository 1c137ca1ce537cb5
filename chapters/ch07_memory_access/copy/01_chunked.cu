// ch07:copy:01_chunked — each thread copies its own contiguous chunk (the baseline).
//
// What: the grid is split into equal contiguous chunks, one per thread, and each thread walks its chunk
// in order. This is the natural habit from CPU code, where one thread streaming through its own range is
// exactly right. Full grid, same geometry as the later steps.
// Why it is slow on a GPU: at each step the 32 threads of a warp touch 32 addresses `chunk` elements
// apart, so one warp-wide load needs 32 separate 32-byte sectors and uses 4 bytes of each. The L1 keeps
// some of the rest for the following iterations, but lines are evicted before they are used up, so
// DRAM moves much more than 8 bytes per element.
// Napkin math: 8.59 GB per launch at n = 2^30; if only one 4-byte word of each 32-byte sector were used,
// the kernel would move up to 8x the bytes. Expect a few times slower than the coalesced step.
// Run: aisp bench run --targets ch07:copy:01_chunked
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::v01 {

__global__ void copy_chunked_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                    std::size_t n, std::size_t chunk) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t begin = thread * chunk;
  const std::size_t end = begin + chunk < n ? begin + chunk : n;
  for (std::size_t i = begin; i < end; ++i) dst[i] = src[i];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  const int blocks = full_wave_blocks(a, threads);
  const std::size_t total = static_cast<std::size_t>(blocks) * threads;
  const std::size_t chunk = (a.n + total - 1) / total;
  copy_chunked_kernel<<<blocks, threads, 0, stream>>>(a.src, a.dst, a.n, chunk);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 1, .slug = "chunked", .kind = VariantKind::baseline,
                      .summary = "each thread copies its own contiguous chunk (CPU habit; uncoalesced)");

}  // namespace aisp::ch07::copy::v01
