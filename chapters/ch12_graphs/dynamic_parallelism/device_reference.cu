// ch12:dynamic_parallelism — the device reference the gate trusts at full size (checked against
// reference.hpp's host loop at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// One plain kernel launched from the host, one block per cell: each block decides its cell's samples
// (reference.hpp samples_of), evaluates them in fp32 exactly as the steps do, and sums them in double
// (each thread its grid-stride share, then a tree in shared memory). No read-back, no child launch:
// nothing of what the ladder varies.
#include "chapters/ch12_graphs/dynamic_parallelism/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::dynamic_parallelism {
namespace {

constexpr int k_reference_threads = 256;

__global__ void integrate_reference_kernel(const float* __restrict__ r, std::int32_t* __restrict__ sizes,
                                           float* __restrict__ out) {
  __shared__ double partial[k_reference_threads];
  const int cell = static_cast<int>(blockIdx.x);
  const float rc = r[cell];
  const std::int32_t n = samples_of(rc);
  const float s = exp2f(2.0f * rc);
  const float inv_n = 1.0f / static_cast<float>(n);  // a power of two: exact
  double sum = 0;
  for (std::int32_t j = static_cast<std::int32_t>(threadIdx.x); j < n; j += k_reference_threads) {
    const float x = (static_cast<float>(j) + 0.5f) * inv_n;  // reference.hpp abscissa()
    sum += static_cast<double>(1.0f / fmaf(s * x, x, 1.0f));  // reference.hpp integrand()
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = k_reference_threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sizes[cell] = n;
    out[cell] = static_cast<float>(partial[0] / static_cast<double>(n));
  }
}

}  // namespace

void integrate_on_device(const float* r, int cells, std::int32_t* sizes, float* out, cudaStream_t stream) {
  integrate_reference_kernel<<<cells, k_reference_threads, 0, stream>>>(r, sizes, out);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch12::dynamic_parallelism
