// ch09:sgemm:06_vectorized — 128-bit loads and stores everywhere, A transposed in shared memory.
//
// What changed: the same 128 x 128 x 8 tiles and 8 x 8 outputs per thread as step 05, but every access is a
// float4. Global loads of A and B: one float4 each per thread per tile (LDG.E.128). A is stored transposed
// (as[k][m]), so that the 8 values of A a thread needs for one k are contiguous: two LDS.128, like B's.
// C is written as float4 too.
// Why it helps: a quarter of the load instructions. Step 05 issued 16 shared loads per 64 FMAs; now 4.
// The transposing store of A is 4 scalar stores per float4; warp w loads rows 32 (w % 4) .. + 31 at one
// k-quad, so those stores hit 32 consecutive words: no bank conflicts.
// Napkin math: 4 LDS.128 + 64 FFMA per k per thread: issue slots are no longer the limit; what is left
// are the B loads (16 threads reading float4s 32 bytes apart: 4-way conflicts) and the stall at each of the
// two __syncthreads per 8-deep k tile.
// Run: aisp bench run --targets ch09:sgemm:06_vectorized
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::sgemm::v06 {

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK / 4 == THREADS && BK * BN / 4 == THREADS, "one float4 of A and of B per thread");

__global__ void __launch_bounds__(THREADS)
    sgemm_vectorized_kernel(const float* __restrict__ a, const float* __restrict__ b,
                            float* __restrict__ c, int n, int k) {
  __shared__ __align__(16) float as[BK][BM];  // transposed: as[p][r] = A[r][k0 + p]
  __shared__ __align__(16) float bs[BK][BN];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int row0 = (t / (BN / TN)) * TM;
  const int col0 = (t % (BN / TN)) * TN;
  a += static_cast<std::size_t>(blockIdx.y) * BM * k;
  b += blockIdx.x * BN;
  c += static_cast<std::size_t>(blockIdx.y) * BM * n + blockIdx.x * BN;

  // Which float4 of each tile this thread moves. A: warp w takes 32 rows and one k-quad, B: one k-row
  // of 32 float4.
  const int a_row = (warp % (BM / 32)) * 32 + lane;
  const int a_quad = warp / (BM / 32);
  const int b_row = t / (BN / 4);
  const int b_col = (t % (BN / 4)) * 4;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const float4 va = *reinterpret_cast<const float4*>(&a[static_cast<std::size_t>(a_row) * k + k0 + 4 * a_quad]);
    as[4 * a_quad + 0][a_row] = va.x;
    as[4 * a_quad + 1][a_row] = va.y;
    as[4 * a_quad + 2][a_row] = va.z;
    as[4 * a_quad + 3][a_row] = va.w;
    *reinterpret_cast<float4*>(&bs[b_row][b_col]) =
        *reinterpret_cast<const float4*>(&b[static_cast<std::size_t>(k0 + b_row) * n + b_col]);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      float reg_a[TM], reg_b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(&reg_a[i]) = *reinterpret_cast<const float4*>(&as[p][row0 + i]);
#pragma unroll
      for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(&reg_b[j]) = *reinterpret_cast<const float4*>(&bs[p][col0 + j]);
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
    for (int j = 0; j < TN; j += 4) {
      *reinterpret_cast<float4*>(&c[static_cast<std::size_t>(row0 + i) * n + col0 + j]) =
          make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(a.n / BN, a.m / BM);
  sgemm_vectorized_kernel<<<grid, THREADS, 0, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(&sgemm_vectorized_kernel), THREADS));
}

AISP_REGISTER_VARIANT_WITH_FACTS(SgemmProblem, launch, facts, .step = 6, .slug = "vectorized",
                                 .kind = VariantKind::step,
                                 .summary = "float4 global and shared accesses, A transposed in shared memory");

}  // namespace aisp::ch09::sgemm::v06
