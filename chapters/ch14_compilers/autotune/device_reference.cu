// ch14:autotune — the device reference the gate trusts at full size (checked against reference.hpp's host
// GEMM at the test size by Correctness.DeviceReferencesMatchTheHost).
//
// Plain and exact enough: 16 x 16 tiles through shared memory, every product accumulated in double (exact
// for these float inputs up to the sum's own double roundings, ~1e-13 at k = 4096), rounded to float once.
#include "chapters/ch14_compilers/autotune/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch14::autotune {
namespace {

constexpr int k_tile = 16;

__global__ void gemm_reference_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                      int m, int n, int k) {
  __shared__ float as[k_tile][k_tile];
  __shared__ float bs[k_tile][k_tile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * k_tile + ty;
  const int col = static_cast<int>(blockIdx.x) * k_tile + tx;
  double acc = 0;
  for (int k0 = 0; k0 < k; k0 += k_tile) {
    as[ty][tx] = (row < m && k0 + tx < k) ? a[static_cast<std::size_t>(row) * k + k0 + tx] : 0.0f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? b[static_cast<std::size_t>(k0 + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int p = 0; p < k_tile; ++p) acc += static_cast<double>(as[ty][p]) * static_cast<double>(bs[p][tx]);
    __syncthreads();
  }
  if (row < m && col < n) c[static_cast<std::size_t>(row) * n + col] = static_cast<float>(acc);
}

}  // namespace

void gemm_on_device(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  const dim3 block(k_tile, k_tile);
  const dim3 grid((n + k_tile - 1) / k_tile, (m + k_tile - 1) / k_tile);
  gemm_reference_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch14::autotune
