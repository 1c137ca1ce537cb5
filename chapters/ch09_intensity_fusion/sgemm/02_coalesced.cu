// ch09:sgemm:02_coalesced — the column index comes from threadIdx.x.
//
// What changed: the two grid indices swap roles. A warp now holds one row and 32 consecutive columns.
// Why it helps: per k, the warp's 32 loads of B are 32 consecutive floats (one 128-byte line instead of 32
// lines), its loads of A are one broadcast address, and its stores of C are one line. The same arithmetic
// now reads a tenth of the sectors.
// Napkin math: per FMA a thread still issues two loads (L1 hits mostly), so the bound becomes the L1/LSU
// rate: one warp load instruction per FMA instruction caps it near 1/2 of the FMA peak at best, and in
// practice the load latency leaves it lower, a few TFLOP/s.
// Run: aisp bench run --targets ch09:sgemm:02_coalesced
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::sgemm::v02 {

__global__ void sgemm_coalesced_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ c, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) {
    acc += a[static_cast<std::size_t>(row) * k + p] * b[static_cast<std::size_t>(p) * n + col];
  }
  c[static_cast<std::size_t>(row) * n + col] = acc;
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 block(32, 32);
  const dim3 grid((a.n + block.x - 1) / block.x, (a.m + block.y - 1) / block.y);
  sgemm_coalesced_kernel<<<grid, block, 0, stream>>>(a.a, a.b, a.c, a.m, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(SgemmProblem, launch, .step = 2, .slug = "coalesced", .kind = VariantKind::step,
                      .summary = "column index from threadIdx.x: a warp reads one line of B per k");

}  // namespace aisp::ch09::sgemm::v02
