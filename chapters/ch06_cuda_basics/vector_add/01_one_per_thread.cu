// ch06:vector_add:01_one_per_thread — one element per thread, one thread per element (the baseline).
//
// What: the textbook kernel. The grid has ceil(n / 256) blocks of 256 threads; thread i adds element i.
// Consecutive threads touch consecutive floats, so every warp access is already coalesced (128 bytes).
// Why it is the honest baseline: it is what the CUDA guide teaches first and what most people write;
// nothing in it is slow on purpose. Its costs are the ones the next steps remove: at n = 2^28 it launches
// a million blocks, each thread computes its index and does a single 4-byte load per input before exiting,
// so the block scheduler and the per-thread prologue run a million times and each thread keeps only
// 8 bytes of loads in flight.
// Napkin math: 3.22 GB per launch; at ~4.3 TB/s of DRAM that is ~0.75 ms. Expect it within 10-20% of that.
// Run: aisp bench run --targets ch06:vector_add:01_one_per_thread
#include "chapters/ch06_cuda_basics/vector_add/problem.hpp"

namespace aisp::ch06::vector_add::v01 {

__global__ void add_one_per_thread_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          float* __restrict__ c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((a.n + threads - 1) / threads);
  add_one_per_thread_kernel<<<blocks, threads, 0, stream>>>(a.a, a.b, a.c, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(VectorAddProblem, launch, .step = 1, .slug = "one_per_thread",
                      .kind = VariantKind::baseline,
                      .summary = "one element per thread, ceil(n/256) blocks: the textbook kernel");

}  // namespace aisp::ch06::vector_add::v01
