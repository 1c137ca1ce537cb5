// ch03:pinned_transfer — the device reference the gate trusts at full size (checked bit for bit against
// reference.hpp's host map at the test size by Correctness.DeviceReferencesMatchTheHost).
//
// Plain: a grid-stride loop, each element's chain of fmaf, the same correctly rounded operation as the
// host's std::fma, so the reference is exact.
#include "chapters/ch03_system/pinned_transfer/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch03::pinned_transfer {
namespace {

__global__ void consume_reference_kernel(float* data, std::size_t n, int fma) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float y = data[i];
    for (int j = 0; j < fma; ++j) y = fmaf(y, k_decay, k_offset);
    data[i] = y;
  }
}

}  // namespace

void consume_on_device(float* ref, std::size_t n, int fma, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  consume_reference_kernel<<<sms * 8, 256, 0, stream>>>(ref, n, fma);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch03::pinned_transfer
