// ch09:sgemm:07_warptile — warp tiles: each warp owns a 64 x 32 piece of the block tile.
//
// What changed: the same 128 x 128 x 8 block tile and 64 outputs per thread as step 06, assigned
// differently. The 8 warps form a 2 x 4 grid of 64 x 32 warp tiles; inside a warp the lanes form an 8 x 4
// grid and each lane owns four 4 x 4 sub-tiles, repeated every 32 rows and every 16 columns, instead of
// one contiguous 8 x 8 block.
// Why it helps: per k, a warp's LDS.128 of A now reads 8 distinct float4s that are contiguous (128 bytes)
// and its LDS.128 of B 4 contiguous float4s: one shared memory wavefront each, every value broadcast to
// 4 or 8 lanes. In step 06 the 16 lanes of a row read float4s 32 bytes apart: 4-way bank conflicts on B.
// A warp also touches a compact 64 x 32 region, so the values it pulls from shared memory are reused
// in registers by more of its own lanes (the CUTLASS "warp-level GEMM" idea).
// Napkin math: 4 conflict-free LDS.128 per 64 FFMA per thread per k: the FMA pipe is the bound left, apart
// from the two barriers per 8-deep tile that drain it (step 08).
// Run: aisp bench run --targets ch09:sgemm:07_warptile
#include "chapters/ch09_intensity_fusion/sgemm/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch09::sgemm::v07 {

constexpr int BM = 128, BN = 128, BK = 8, WM = 64, WN = 32;
constexpr int THREADS = 32 * (BM / WM) * (BN / WN);  // 256
constexpr int M_ITER = WM / 32, N_ITER = WN / 16;     // 4 x 4 sub-tiles per lane: 2 x 2
constexpr int TM = 4 * M_ITER, TN = 4 * N_ITER;       // 8 x 8 outputs per thread
static_assert(BM * BK / 4 == THREADS && BK * BN / 4 == THREADS, "one float4 of A and of B per thread");

__global__ void __launch_bounds__(THREADS)
    sgemm_warptile_kernel(const float* __restrict__ a, const float* __restrict__ b,
                          float* __restrict__ c, int n, int k) {
  __shared__ __align__(16) float as[BK][BM];  // transposed: as[p][r] = A[r][k0 + p]
  __shared__ __align__(16) float bs[BK][BN];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int warp_m = warp / (BN / WN), warp_n = warp % (BN / WN);
  const int lane_m = lane / 4, lane_n = lane % 4;
  a += static_cast<std::size_t>(blockIdx.y) * BM * k;
  b += blockIdx.x * BN;

  const int a_row = (warp % (BM / 32)) * 32 + lane;
  const int a_quad = warp / (BM / 32);
  const int b_row = t / (BN / 4);
  const int b_col = (t % (BN / 4)) * 4;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const float4 va =
        *reinterpret_cast<const float4*>(&a[static_cast<std::size_t>(a_row) * k + k0 + 4 * a_quad]);
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
      for (int im = 0; im < M_ITER; ++im) {
        *reinterpret_cast<float4*>(&reg_a[4 * im]) =
            *reinterpret_cast<const float4*>(&as[p][warp_m * WM + im * 32 + lane_m * 4]);
      }
#pragma unroll
      for (int jn = 0; jn < N_ITER; ++jn) {
        *reinterpret_cast<float4*>(&reg_b[4 * jn]) =
            *reinterpret_cast<const float4*>(&bs[p][warp_n * WN + jn * 16 + lane_n * 4]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += reg_a[i] * reg_b[j];
      }
    }
    __syncthreads();
  }

  // Sub-tile (im, jn) row i of a lane: 4 contiguous outputs, one float4 store.
  const int tile_row = blockIdx.y * BM + warp_m * WM + lane_m * 4;
  const int tile_col = blockIdx.x * BN + warp_n * WN + lane_n * 4;
#pragma unroll
  for (int im = 0; im < M_ITER; ++im) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::size_t row = static_cast<std::size_t>(tile_row + im * 32 + i);
#pragma unroll
      for (int jn = 0; jn < N_ITER; ++jn) {
        const float* v = &acc[4 * im + i][4 * jn];
        *reinterpret_cast<float4*>(&c[row * n + tile_col + jn * 16]) =
            make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(a.n / BN, a.m / BM);
  sgemm_warptile_kernel<<<grid, THREADS, 0, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(&sgemm_warptile_kernel), THREADS));
}

AISP_REGISTER_VARIANT_WITH_FACTS(SgemmProblem, launch, facts, .step = 7, .slug = "warptile",
                                 .kind = VariantKind::step,
                                 .summary = "64x32 warp tiles, lanes own 4x4 sub-tiles: conflict-free LDS.128");

}  // namespace aisp::ch09::sgemm::v07
