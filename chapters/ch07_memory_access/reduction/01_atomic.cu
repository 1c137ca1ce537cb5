// ch07:reduction:01_atomic — every thread adds its element to the result with one atomicAdd (the baseline).
//
// What: one thread per element (256-thread blocks, n / 256 of them), each doing atomicAdd(out, x[i]) after
// the output was zeroed on the stream. It is the shortest correct parallel sum, and the reads are already
// coalesced.
// Why it is slow: all n atomics go to one address. Atomics are performed at the L2 slice that owns the
// address, one after another (each must see the previous result), so the kernel runs at that slice's
// atomic rate instead of at DRAM speed — the whole GPU queues behind one unit.
// Napkin math: 1.07 GB read would take ~0.25 ms at the DRAM read ceiling; 2^28 serialized atomics at a
// few clocks each take hundreds of ms (an H200 measures ~1.75 ns per atomic: 471 ms), over 1,000 times
// slower. (The same serialization is why this step's rounding error is the ladder's largest: it is one
// running fp32 sum; see problem.hpp.)
// Run: aisp bench run --targets ch07:reduction:01_atomic
#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::reduction::v01 {

constexpr int k_threads = 256;

__global__ void sum_atomic_kernel(const float* __restrict__ x, float* __restrict__ out, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
  sum_atomic_kernel<<<blocks, k_threads, 0, stream>>>(a.x, a.out, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(ReductionProblem, launch, .step = 1, .slug = "atomic", .kind = VariantKind::baseline,
                      .summary = "one atomicAdd per element, all on the one result address");

}  // namespace aisp::ch07::reduction::v01
