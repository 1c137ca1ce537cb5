// ch12:graphs — the device reference the gate trusts at full size (checked against reference.hpp's host
// chain at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// One kernel, one thread per element, applying the K steps in order with the same fmaf as the chain's
// kernels: the same arithmetic on the same values, so the result is bitwise the chain's, with none of
// the launches the ladder is about.
#include "chapters/ch12_graphs/graphs/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::graphs {
namespace {

__global__ void chain_reference_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                       const float* __restrict__ shift, int n, int kernels,
                                       float* __restrict__ out) {
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < kernels; ++k) v = fmaf(scale[k], v, shift[k]);
  out[i] = v;
}

}  // namespace

void chain_on_device(const float* x, const float* scale, const float* shift, int n, int kernels, float* out,
                     cudaStream_t stream) {
  const int blocks = (n + k_threads - 1) / k_threads;
  chain_reference_kernel<<<blocks, k_threads, 0, stream>>>(x, scale, shift, n, kernels, out);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch12::graphs
