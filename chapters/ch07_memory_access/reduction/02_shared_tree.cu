// ch07:reduction:02_shared_tree — each block sums its 256 elements in shared memory, then one atomic.
//
// What changed: a thread no longer adds its element to the result. It stores it in shared memory and the
// block halves the array 8 times (thread t < s adds element t + s to element t, a barrier after each
// round); thread 0 then adds the block's sum to the result with one atomicAdd. Same grid: one element
// per thread, 256-thread blocks.
// Why it helps: 256 times fewer atomics on the result address (2^20 instead of 2^28). The tree uses
// "sequential addressing" (active threads are the low ones, reading t and t + s), so the active warps are
// full and the shared-memory accesses are conflict-free.
// What it leaves: 2^20 atomics are still serialized on one address (~1.8 ms at the ~1.75 ns per atomic
// that step 01 measures on an H200, several times the ~0.25 ms of DRAM time); each thread has one 4-byte
// load in flight; and 8 barriers per 256 elements, half the threads idle at the first round.
// Napkin math: bound by the atomics and the barriers rather than DRAM; expect a couple of orders of
// magnitude faster than step 01 and still several times the DRAM floor.
// Run: aisp bench run --targets ch07:reduction:02_shared_tree
#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::reduction::v02 {

constexpr int k_threads = 256;  // a power of two: the tree halves it down to 1

__global__ void sum_shared_tree_kernel(const float* __restrict__ x, float* __restrict__ out, std::size_t n) {
  __shared__ float partial[k_threads];
  const int t = static_cast<int>(threadIdx.x);
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + t;
  partial[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = k_threads / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, partial[0]);
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
  sum_shared_tree_kernel<<<blocks, k_threads, 0, stream>>>(a.x, a.out, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(ReductionProblem, launch, .step = 2, .slug = "shared_tree", .kind = VariantKind::step,
                      .summary = "tree sum of 256 elements in shared memory, one atomicAdd per block");

}  // namespace aisp::ch07::reduction::v02
