// ch10:cluster_reduction — the device reference the gate trusts at full size (checked against
// reference.hpp's compensated host sum at the test size by Correctness.DeviceReferencesMatchTheHost).
//
// Each thread sums its grid-stride share in double, the block adds its threads' sums in a shared-memory
// tree, and one double atomicAdd per block accumulates them. A double's 53 bits leave the error ~10^-9
// at n = 2^28, far below fp32's rounding of the result, so the atomics' order does not matter.
#include "chapters/ch10_tensor_cores/cluster_reduction/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch10::cluster_reduction {
namespace {

constexpr int k_ref_threads = 256;
constexpr int k_ref_blocks = 1024;  // any number works; enough to stream the array at a useful speed

__global__ void sum_reference_kernel(const float* __restrict__ x, std::size_t n, double* acc) {
  __shared__ double scratch[k_ref_threads];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * k_ref_threads;
  double s = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_ref_threads + threadIdx.x; i < n; i += stride) {
    s += x[i];
  }
  scratch[threadIdx.x] = s;
  __syncthreads();
  for (int half = k_ref_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(acc, scratch[0]);
}

__global__ void round_to_float_kernel(const double* acc, float* out) { *out = static_cast<float>(*acc); }

}  // namespace

void sum_on_device(const float* x, std::size_t n, double* scratch, float* out, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(double), stream));
  sum_reference_kernel<<<k_ref_blocks, k_ref_threads, 0, stream>>>(x, n, scratch);
  AISP_CHECK_LAUNCH();
  round_to_float_kernel<<<1, 1, 0, stream>>>(scratch, out);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch10::cluster_reduction
