// ch12:pdl — the device reference the gate trusts at full size (checked against reference.hpp's host
// computation at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// One plain kernel computing both results per element in double, then rounding each once to fp32: no
// dependency between kernels at all, so nothing of what the ladder varies can make it wrong.
#include "chapters/ch12_graphs/pdl/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::pdl {
namespace {

__global__ void pair_reference_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, std::size_t n, int cols,
                                      float* __restrict__ y_ref, float* __restrict__ out_ref) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int col = static_cast<int>(i % static_cast<std::size_t>(cols));
    // reference.hpp's silu and scale_bias, written out: those are host functions.
    const double xd = x[i];
    const double y = xd / (1.0 + exp(-xd));
    y_ref[i] = static_cast<float>(y);
    out_ref[i] = static_cast<float>(y * static_cast<double>(w[col]) + static_cast<double>(b[col]));
  }
}

}  // namespace

void pair_on_device(const float* x, const float* w, const float* b, int rows, int cols, float* y_ref,
                    float* out_ref, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  pair_reference_kernel<<<sms * 8, 256, 0, stream>>>(x, w, b, n, cols, y_ref, out_ref);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch12::pdl
