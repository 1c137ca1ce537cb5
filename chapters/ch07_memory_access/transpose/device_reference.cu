// ch07:transpose — the device reference the gate trusts at full size (checked against reference.hpp on
// the host at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// Deliberately the plainest possible kernel: a grid-stride loop over the input in order, one element per
// iteration, its output position computed from the division. Slow, and obviously right.
#include "chapters/ch07_memory_access/transpose/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::transpose {
namespace {

__global__ void transpose_reference_kernel(const float* __restrict__ in, float* __restrict__ out,
                                           std::size_t rows, std::size_t cols) {
  const std::size_t count = rows * cols;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t r = i / cols;
    const std::size_t c = i % cols;
    out[c * rows + r] = in[i];
  }
}

}  // namespace

void transpose_on_device(const float* in, float* out, std::size_t rows, std::size_t cols, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  transpose_reference_kernel<<<sms * 8, 256, 0, stream>>>(in, out, rows, cols);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch07::transpose
