// ch01:launch_batching — the device reference the gate trusts at full size (checked against reference.hpp's
// host GEMM at the test size by Correctness.DeviceReferencesMatchTheHost).
//
// Plain and exact enough: one thread per C element, its k products summed in double (bf16 x bf16 is exact
// in double and a k-term double sum errs by ~k 2^-53, far below fp32's rounding of the result).
#include "chapters/ch01_goodput/launch_batching/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch01::launch_batching {
namespace {

__global__ void batched_gemm_reference_kernel(const __nv_bfloat16* __restrict__ a,
                                              const __nv_bfloat16* __restrict__ b, float* __restrict__ c,
                                              std::size_t total, int m, int n, int k) {
  const std::size_t idx = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  // idx = (item * m + row) * n + col; the A row it needs is row (item * m + row) of the stacked A.
  const std::size_t stacked_row = idx / n;
  const int col = static_cast<int>(idx % n);
  const __nv_bfloat16* a_row = a + stacked_row * k;
  double s = 0;
  for (int j = 0; j < k; ++j) {
    const double bj = __bfloat162float(b[static_cast<std::size_t>(j) * n + col]);
    s += static_cast<double>(__bfloat162float(a_row[j])) * bj;
  }
  c[idx] = static_cast<float>(s);
}

}  // namespace

void batched_gemm_on_device(const Args& a, float* c_ref, cudaStream_t stream) {
  const std::size_t total = static_cast<std::size_t>(a.batch) * a.m * a.n;
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>((total + threads - 1) / threads);
  batched_gemm_reference_kernel<<<blocks, threads, 0, stream>>>(a.a, a.b, c_ref, total, a.m, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch01::launch_batching
