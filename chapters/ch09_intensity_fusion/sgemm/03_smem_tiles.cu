// ch09:sgemm:03_smem_tiles — 32 x 32 tiles of A and B staged in shared memory.
//
// What changed: a 32 x 32 block of threads computes a 32 x 32 tile of C. It walks k in steps of 32: the
// block loads a 32 x 32 tile of A and one of B into shared memory (one coalesced float per thread each),
// synchronizes, and every thread runs 32 FMAs on them.
// Why it helps: each float loaded from global memory is now used by 32 threads, so the L1/L2 traffic per
// FMA falls 32-fold. The inner loop reads shared memory instead: As[ty][p] is a broadcast within the warp,
// Bs[p][tx] 32 consecutive words (no bank conflict).
// Napkin math: still 2 shared loads per FMA, and the shared memory pipe delivers 32 words per clock per
// SM against 128 FMAs: bound near 1/4 of the FP32 peak, in practice less (sync stalls, 1024-thread blocks).
// Run: aisp bench run --targets ch09:sgemm:03_smem_tiles
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::sgemm::v03 {

constexpr int TILE = 32;

__global__ void sgemm_smem_tiles_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                        float* __restrict__ c, int n, int k) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    as[ty][tx] = a[static_cast<std::size_t>(row) * k + k0 + tx];
    bs[ty][tx] = b[static_cast<std::size_t>(k0 + ty) * n + col];
    __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
    for (int p = 0; p < TILE; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();  // everyone is done reading before the next tiles overwrite them
  }
  c[static_cast<std::size_t>(row) * n + col] = acc;
}

void launch(const Args& a, cudaStream_t stream) {
  // m and n are multiples of 128 and k of 32 (problem.hpp), so every tile is full.
  const dim3 block(TILE, TILE);
  const dim3 grid(a.n / TILE, a.m / TILE);
  sgemm_smem_tiles_kernel<<<grid, block, 0, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(SgemmProblem, launch, .step = 3, .slug = "smem_tiles", .kind = VariantKind::step,
                      .summary = "32x32 tiles of A and B in shared memory: each global load used 32 times");

}  // namespace aisp::ch09::sgemm::v03
