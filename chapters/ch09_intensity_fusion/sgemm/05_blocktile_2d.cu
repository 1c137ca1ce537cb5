// ch09:sgemm:05_blocktile_2d — each thread computes an 8 x 8 tile of outputs.
//
// What changed: a block of 256 threads computes a 128 x 128 tile of C (BM = BN = 128, BK = 8). Thread
// (ty, tx) of a 16 x 16 grid owns rows 8 ty .. + 7 and columns 8 tx .. + 7 of the tile. Per k it loads 8
// values of A and 8 of B into registers and forms their outer product: 64 FMAs.
// Why it helps: 16 shared loads per 64 FMAs (1/4 word per FMA, step 04 needed 9/8), and each float loaded
// from global memory is now used 128 times per block instead of 64: half the L2 traffic per FLOP.
// Napkin math: the shared pipe (32 words/clock/SM) against 128 FMAs/clock allows up to 2x the FMA rate:
// shared memory is no longer the bound, the FMA pipe can be. What remains: the loads of B (addresses 8
// words apart: 4-way bank conflicts) and scalar loads everywhere; steps 06 and 07 remove those.
// Run: aisp bench run --targets ch09:sgemm:05_blocktile_2d
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::sgemm::v05 {

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256

__global__ void __launch_bounds__(THREADS)
    sgemm_blocktile_2d_kernel(const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ c, int n, int k) {
  __shared__ float as[BM][BK];
  __shared__ float bs[BK][BN];
  const int t = threadIdx.x;
  const int row0 = (t / (BN / TN)) * TM;
  const int col0 = (t % (BN / TN)) * TN;
  a += static_cast<std::size_t>(blockIdx.y) * BM * k;
  b += blockIdx.x * BN;
  c += static_cast<std::size_t>(blockIdx.y) * BM * n + blockIdx.x * BN;

  float acc[TM][TN] = {};
  float reg_a[TM], reg_b[TN];
  for (int k0 = 0; k0 < k; k0 += BK) {
    // 1024 floats per tile, 4 per thread, in passes of 256 consecutive floats (coalesced rows).
    for (int r = t / BK; r < BM; r += THREADS / BK) {
      as[r][t % BK] = a[static_cast<std::size_t>(r) * k + k0 + t % BK];
    }
    for (int r = t / BN; r < BK; r += THREADS / BN) {
      bs[r][t % BN] = b[static_cast<std::size_t>(k0 + r) * n + t % BN];
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
#pragma unroll
      for (int i = 0; i < TM; ++i) reg_a[i] = as[row0 + i][p];
#pragma unroll
      for (int j = 0; j < TN; ++j) reg_b[j] = bs[p][col0 + j];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += reg_a[i] * reg_b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) c[static_cast<std::size_t>(row0 + i) * n + col0 + j] = acc[i][j];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(a.n / BN, a.m / BM);
  sgemm_blocktile_2d_kernel<<<grid, THREADS, 0, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(&sgemm_blocktile_2d_kernel), THREADS));
}

AISP_REGISTER_VARIANT_WITH_FACTS(SgemmProblem, launch, facts, .step = 5, .slug = "blocktile_2d",
                                 .kind = VariantKind::step,
                                 .summary = "128x128 block tile, 8x8 outputs per thread: 16 loads per 64 FMAs");

}  // namespace aisp::ch09::sgemm::v05
