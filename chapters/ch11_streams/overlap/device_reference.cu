// ch11:overlap — the device reference the gate trusts at full size (checked against reference.hpp's host
// polynomial at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// The plainest form of the work: one grid-stride kernel reading the pinned input through its mapped
// address (no copies, no streams), the same fma sequence as the steps, written to device memory.
#include "chapters/ch11_streams/overlap/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::overlap {
namespace {

__global__ void horner_reference_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n,
                                        int fmas) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    float acc = 1.0f;
    for (int j = 0; j < fmas; ++j) acc = __fmaf_rn(acc, v, 1.0f);
    y[i] = acc;
  }
}

}  // namespace

void horner_on_device(const float* x, float* y, std::size_t n, int fmas, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  horner_reference_kernel<<<sms * 8, 256, 0, stream>>>(x, y, n, fmas);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch11::overlap
