// ch07:reduction — the device reference the gate trusts at full size (checked against reference.hpp's
// compensated host sum at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// Plain and exact enough: each thread sums its grid-stride share in double and adds it to one double
// accumulator. A double's 53 bits leave the error ~10^-9 at n = 2^28, far below fp32's rounding of the
// result, so the order the atomics happen in does not matter.
#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::reduction {
namespace {

__global__ void sum_reference_kernel(const float* __restrict__ x, std::size_t n, double* acc) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  double s = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    s += x[i];
  }
  atomicAdd(acc, s);
}

__global__ void round_to_float_kernel(const double* acc, float* out) { *out = static_cast<float>(*acc); }

}  // namespace

void sum_on_device(const float* x, std::size_t n, double* scratch, float* out, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  AISP_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(double), stream));
  sum_reference_kernel<<<sms * 8, 256, 0, stream>>>(x, n, scratch);
  AISP_CHECK_LAUNCH();
  round_to_float_kernel<<<1, 1, 0, stream>>>(scratch, out);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch07::reduction
