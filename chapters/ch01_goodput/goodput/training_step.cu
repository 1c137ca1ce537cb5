// ch01:goodput — the training step every variant runs: four kernels, identical for every step of the
// ladder (the ladder is about how the host reads the losses, not about these kernels).
//
// Deterministic on purpose: the loss's sum has a fixed order (each thread's grid-stride share, then a
// fixed tree per block, then a fixed tree over the blocks), so every variant writes bit-identical losses
// and two runs of one variant agree exactly.
#include <cmath>
#include <string>

#include "chapters/ch01_goodput/goodput/problem.hpp"
#include "core/base/error.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch01::goodput {
namespace {

constexpr int k_threads = 256;  // one element per thread in the elementwise kernels; the partial sums' block

unsigned elementwise_blocks(std::size_t n) { return static_cast<unsigned>((n + k_threads - 1) / k_threads); }

// r = w x - t, one rounding (an explicit fma, so that the compiler's contraction choices cannot change it).
__global__ void forward_kernel(const float* __restrict__ w, const float* __restrict__ x,
                               const float* __restrict__ t, float* __restrict__ r, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) r[i] = fmaf(w[i], x[i], -t[i]);
}

// A block's sum of its values in shared memory, fixed order; the result in element 0.
template <int Threads>
__device__ double block_sum(double v, double* shared) {
  const int tid = static_cast<int>(threadIdx.x);
  shared[tid] = v;
  __syncthreads();
  for (int s = Threads / 2; s > 0; s /= 2) {
    if (tid < s) shared[tid] += shared[tid + s];
    __syncthreads();
  }
  return shared[0];
}

// partials[b] = sum of r^2 over block b's grid-stride share, in double.
__global__ void loss_partials_kernel(const float* __restrict__ r, std::size_t n, double* __restrict__ partials) {
  __shared__ double shared[k_threads];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * k_threads;
  double s = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x; i < n; i += stride) {
    const double v = r[i];
    s += v * v;
  }
  const double total = block_sum<k_threads>(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// losses[step] = (sum of the partials) / 2n, one block of k_max_reduce_blocks threads.
__global__ void loss_final_kernel(const double* __restrict__ partials, int count, std::size_t n,
                                  float* __restrict__ losses, int step) {
  __shared__ double shared[k_max_reduce_blocks];
  const int tid = static_cast<int>(threadIdx.x);
  const double total = block_sum<k_max_reduce_blocks>(tid < count ? partials[tid] : 0.0, shared);
  if (tid == 0) losses[step] = static_cast<float>(0.5 * total / static_cast<double>(n));
}

// w -= lr r x: g = r x rounded, then one fma.
__global__ void update_kernel(float* __restrict__ w, const float* __restrict__ r, const float* __restrict__ x,
                              std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) w[i] = fmaf(-k_learning_rate, r[i] * x[i], w[i]);
}

}  // namespace

void enqueue_reset(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.w, a.w0, sizeof(float) * a.n, cudaMemcpyDeviceToDevice, stream));
}

void enqueue_training_step(const Args& a, int step, cudaStream_t stream) {
  const unsigned blocks = elementwise_blocks(a.n);
  forward_kernel<<<blocks, k_threads, 0, stream>>>(a.w, a.x, a.t, a.r, a.n);
  AISP_CHECK_LAUNCH();
  loss_partials_kernel<<<static_cast<unsigned>(a.reduce_blocks), k_threads, 0, stream>>>(a.r, a.n, a.partials);
  AISP_CHECK_LAUNCH();
  loss_final_kernel<<<1, k_max_reduce_blocks, 0, stream>>>(a.partials, a.reduce_blocks, a.n, a.losses, step);
  AISP_CHECK_LAUNCH();
  update_kernel<<<blocks, k_threads, 0, stream>>>(a.w, a.r, a.x, a.n);
  AISP_CHECK_LAUNCH();
}

void check_loss(float loss, int step) {
  if (!std::isfinite(loss)) {
    throw DataError("ch01:goodput: the loss of step " + std::to_string(step) +
                    " is not finite: training diverged");
  }
}

}  // namespace aisp::ch01::goodput
