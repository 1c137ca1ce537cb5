// ch12:work_queue — the device reference the gate trusts at full size (checked against reference.hpp's
// host sums at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// Plain and independent of what the ladder varies: one block per item (the hardware's block scheduler
// hands out the items, no static split and no queue), each thread sums its features in double, and the
// block adds its threads' sums in double through shared memory. The features are the same fp32 Horner
// evaluation as reference.hpp's feature_reference(); only the summation is exact-er than the steps'.
#include "chapters/ch12_graphs/work_queue/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::work_queue {
namespace {

constexpr int k_reference_threads = 256;

__device__ float feature(float x) {
  float y = coefficient(k_degree);
#pragma unroll
  for (int k = k_degree - 1; k >= 0; --k) y = fmaf(y, x, coefficient(k));
  return y;
}

__global__ void sum_items_reference_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ offsets,
                                           float* __restrict__ out) {
  __shared__ double partial[k_reference_threads];
  const int item = static_cast<int>(blockIdx.x);
  const std::int32_t begin = offsets[item], end = offsets[item + 1];
  double s = 0;
  for (std::int32_t j = begin + static_cast<std::int32_t>(threadIdx.x); j < end; j += k_reference_threads) {
    s += static_cast<double>(feature(x[j]));
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = k_reference_threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[item] = static_cast<float>(partial[0]);
}

}  // namespace

void sum_items_on_device(const float* x, const std::int32_t* offsets, int items, float* out, cudaStream_t stream) {
  sum_items_reference_kernel<<<items, k_reference_threads, 0, stream>>>(x, offsets, out);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch12::work_queue
