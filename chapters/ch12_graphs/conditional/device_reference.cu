// ch12:conditional — the device reference the gate trusts at full size (checked against reference.hpp's
// host loop, which it must match exactly, at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// The whole loop in one block of 1,024 threads: each thread iterates its strided share of the elements,
// and __syncthreads_or tells every thread at once whether any element moved, so the block decides to go
// on by itself. Slow (one SM does all the work: a few ms at the default size), plain, and independent of
// everything the ladder varies: no host round trip, no graph.
#include "chapters/ch12_graphs/conditional/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::conditional {
namespace {

constexpr int k_reference_threads = 1024;

__global__ void solve_reference_kernel(const float* __restrict__ c, int n, int max_iters, float* __restrict__ x,
                                       std::int32_t* __restrict__ iterations) {
  for (int i = threadIdx.x; i < n; i += k_reference_threads) x[i] = 0.0f;
  std::int32_t done = 0;
  bool again = true;
  while (again) {  // uniform: every thread sees the same __syncthreads_or result
    int moved = 0;
    for (int i = threadIdx.x; i < n; i += k_reference_threads) {
      const float old = x[i];
      const float next = c[i] / (1.0f + old);  // reference.hpp iterate()
      moved |= fabsf(next - old) > k_rel_tol * fabsf(next) ? 1 : 0;  // still_moving()
      x[i] = next;
    }
    ++done;
    again = __syncthreads_or(moved) != 0 && done < max_iters;
  }
  if (threadIdx.x == 0) *iterations = done;
}

}  // namespace

void solve_on_device(const float* c, int n, int max_iters, float* x, std::int32_t* iterations,
                     cudaStream_t stream) {
  solve_reference_kernel<<<1, k_reference_threads, 0, stream>>>(c, n, max_iters, x, iterations);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch12::conditional
