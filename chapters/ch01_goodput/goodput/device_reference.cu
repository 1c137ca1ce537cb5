// ch01:goodput — the device reference the gate trusts at full size (checked against reference.hpp's host
// loop at the test size by Correctness.DeviceReferencesMatchTheHost).
//
// Each element's trajectory is its own, so one thread follows one element through every step in double;
// each block sums its r^2 per step and adds it to that step's double accumulator. The atomics' order
// varies, but in double the difference is ~1e-16 relative, far below fp32's rounding of the result.
#include "chapters/ch01_goodput/goodput/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch01::goodput {
namespace {

constexpr int k_ref_threads = 256;

__global__ void trajectories_kernel(const float* __restrict__ x, const float* __restrict__ t,
                                    const float* __restrict__ w0, std::size_t n, int steps, double* acc) {
  __shared__ double shared[k_ref_threads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_ref_threads + tid;
  const bool live = i < n;
  const double xi = live ? x[i] : 0.0, ti = live ? t[i] : 0.0;
  double w = live ? w0[i] : 0.0;
  const double lr = k_learning_rate;
  for (int s = 0; s < steps; ++s) {
    const double r = w * xi - ti;  // 0 for the threads past n
    shared[tid] = r * r;
    __syncthreads();
    for (int half = k_ref_threads / 2; half > 0; half /= 2) {
      if (tid < half) shared[tid] += shared[tid + half];
      __syncthreads();
    }
    if (tid == 0) atomicAdd(&acc[s], shared[0]);
    __syncthreads();  // shared[0] is read before the next step overwrites it
    w -= lr * r * xi;
  }
}

__global__ void losses_kernel(const double* __restrict__ acc, int steps, std::size_t n, float* __restrict__ out) {
  const int s = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s < steps) out[s] = static_cast<float>(0.5 * acc[s] / static_cast<double>(n));
}

}  // namespace

void training_losses_on_device(const Args& a, double* acc, float* losses_ref, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double) * static_cast<std::size_t>(a.steps), stream));
  const auto blocks = static_cast<unsigned>((a.n + k_ref_threads - 1) / k_ref_threads);
  trajectories_kernel<<<blocks, k_ref_threads, 0, stream>>>(a.x, a.t, a.w0, a.n, a.steps, acc);
  AISP_CHECK_LAUNCH();
  losses_kernel<<<static_cast<unsigned>((a.steps + 255) / 256), 256, 0, stream>>>(acc, a.steps, a.n, losses_ref);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch01::goodput
