// ch09:sgemm:01_naive — one thread per output element, every operand straight from global memory.
//
// What it is: the GEMM as written on paper. Thread (x, y) of the grid computes C[x][y] as a dot product of
// row x of A and column y of B, reading 2 k floats through the caches. The row index comes from
// threadIdx.x, the first index of the first dimension: the natural first way to write it, and the wrong one
// for memory (step 02 shows why).
// Why it is slow: the 32 threads of a warp have consecutive rows x and one column y. Their loads of A are
// k floats apart (32 different cache lines per instruction), their loads of B are all the same address,
// and their stores of C are n floats apart. Nothing is reused on chip beyond what L1/L2 happen to keep.
// Napkin math: 2 k loads per FMA pair -> 8 bytes per 2 FLOPs from L1/L2; with 32 sectors per warp load
// this runs far below even the L2 bandwidth bound, around 1% of the FP32 peak.
// Run: aisp bench run --targets ch09:sgemm:01_naive
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::sgemm::v01 {

__global__ void sgemm_naive_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int m, int n, int k) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) {
    acc += a[static_cast<std::size_t>(row) * k + p] * b[static_cast<std::size_t>(p) * n + col];
  }
  c[static_cast<std::size_t>(row) * n + col] = acc;
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 block(32, 32);
  const dim3 grid((a.m + block.x - 1) / block.x, (a.n + block.y - 1) / block.y);
  sgemm_naive_kernel<<<grid, block, 0, stream>>>(a.a, a.b, a.c, a.m, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(SgemmProblem, launch, .step = 1, .slug = "naive", .kind = VariantKind::baseline,
                      .summary = "one thread per output, row index from threadIdx.x, all loads global");

}  // namespace aisp::ch09::sgemm::v01
