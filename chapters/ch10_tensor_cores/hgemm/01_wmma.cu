// ch10:hgemm:01_wmma — tensor cores through the portable WMMA API (the baseline).
//
// What: each 256-thread block computes a 128x128 tile of C = A * B^T. Per 32-wide slice of K, the
// block loads the A slice (128x32) and the B slice (128x32) from global memory into shared memory
// with 16-byte loads and stores, waits, and each of its 8 warps multiplies them with nvcuda::wmma
// 16x16x16 bf16 fragments into a 32x64 warp tile of fp32 accumulators (2x4 fragments). The tile is
// finally rounded to bf16 through a small per-warp shared scratch. This is the honest tensor-core
// baseline: full grid, a reasonable block and warp tiling, padded shared rows; no asynchronous
// copies, no pipelining.
// Why it is not fast: every K slice is a load -> __syncthreads -> compute -> __syncthreads round
// trip, so the tensor cores idle while the block waits on DRAM/L2 latency (only 1-2 blocks per SM
// hide it); WMMA fragment loads are opaque ldmatrix-like loads whose bank behaviour we only soften
// with padding; and a 32x64 warp tile reads 3 KiB of fragments per 16-deep step for 64 KFLOP: at
// the SM's dense BF16 rate of 4096 FLOP/clk that would be 192 B/clk of shared-memory reads, 1.5x
// the 128 B/clk an SM delivers.
// Napkin math: 2 * 8192^3 = 1.1 TFLOP per launch: 1.1 ms at the H200's ~990 TFLOP/s dense BF16
// spec; cuBLAS takes ~1.38 ms (~800 TFLOP/s). Per block and K slice: 16 KiB of loads for 1 MFLOP of
// MMA. Expect a few hundred TFLOP/s at best, a fraction of cuBLAS.
// Run: aisp bench run --targets ch10:hgemm:01_wmma
// CUDA C++ Programming Guide: "Warp Matrix Functions" (wmma::load_matrix_sync, mma_sync, bf16
// fragments).
#include <mma.h>

#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v01 {

namespace wmma = nvcuda::wmma;

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int k_threads = 256;   // 8 warps: 4 along M x 2 along N
constexpr int WM = 32, WN = 64;  // warp tile: 2 x 4 fragments of 16x16
constexpr int k_frag_m = WM / 16, k_frag_n = WN / 16;
// Rows of 32 bf16 are 64 bytes; 8 bf16 of padding shift successive rows by 16 bytes so the 16 rows
// a fragment load touches do not all start on the same banks. wmma needs ldm % 8 == 0 for 16-bit
// types.
constexpr int k_ld = BK + 8;

// One 16-byte piece of each tile per thread and pass: 128 rows x 4 pieces = 512 pieces = 2 passes.
__device__ inline void load_tile(__nv_bfloat16 (*dst)[k_ld], const __nv_bfloat16* src, int ld) {
  for (int p = threadIdx.x; p < BM * BK / 8; p += k_threads) {
    const int row = p / (BK / 8), col = p % (BK / 8) * 8;
    *reinterpret_cast<uint4*>(&dst[row][col]) =
        *reinterpret_cast<const uint4*>(src + static_cast<std::size_t>(row) * ld + col);
  }
}

__global__ void __launch_bounds__(k_threads)
    hgemm_wmma_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                      __nv_bfloat16* __restrict__ c, int n, int k) {
  __shared__ __align__(32) __nv_bfloat16 a_tile[BM][k_ld];
  __shared__ __align__(32) __nv_bfloat16 b_tile[BN][k_ld];
  __shared__ __align__(32) float scratch[k_threads / 32][16 * 16];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 2, warp_n = warp % 2;
  const int block_m = blockIdx.y * BM, block_n = blockIdx.x * BN;
  const __nv_bfloat16* a_block = a + static_cast<std::size_t>(block_m) * k;
  const __nv_bfloat16* b_block = b + static_cast<std::size_t>(block_n) * k;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[k_frag_m][k_frag_n];
  for (int i = 0; i < k_frag_m; ++i)
    for (int j = 0; j < k_frag_n; ++j)
      wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < k; k0 += BK) {
    load_tile(a_tile, a_block + k0, k);
    load_tile(b_tile, b_block + k0, k);
    __syncthreads();
    for (int kk = 0; kk < BK; kk += 16) {
      // A is K-contiguous (row_major); B is N x K with K contiguous, i.e. B^T (K x N) stored
      // column-major.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[k_frag_m];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[k_frag_n];
      for (int i = 0; i < k_frag_m; ++i)
        wmma::load_matrix_sync(fa[i], &a_tile[warp_m * WM + i * 16][kk], k_ld);
      for (int j = 0; j < k_frag_n; ++j)
        wmma::load_matrix_sync(fb[j], &b_tile[warp_n * WN + j * 16][kk], k_ld);
      for (int i = 0; i < k_frag_m; ++i)
        for (int j = 0; j < k_frag_n; ++j)
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();  // the next slice overwrites the tiles
  }

  // The accumulator layout is opaque, so each fragment goes through shared memory to be rounded to
  // bf16: lane l converts row l/2, columns (l%2)*8 .. +7, and writes them as one 16-byte store.
  float* mine = scratch[warp];
  for (int i = 0; i < k_frag_m; ++i) {
    for (int j = 0; j < k_frag_n; ++j) {
      wmma::store_matrix_sync(mine, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int row = lane / 2, col = lane % 2 * 8;
      __align__(16) __nv_bfloat16 out[8];
      for (int e = 0; e < 8; ++e)
        out[e] = __float2bfloat16(mine[row * 16 + col + e]);
      const std::size_t gm = block_m + warp_m * WM + i * 16 + row;
      const std::size_t gn = block_n + warp_n * WN + j * 16 + col;
      *reinterpret_cast<uint4*>(c + gm * n + gn) = *reinterpret_cast<const uint4*>(out);
      __syncwarp();  // the next fragment reuses the scratch
    }
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(a.n / BN, a.m / BM);  // shapes.hpp guarantees M, N, K % 256 == 0
  hgemm_wmma_kernel<<<grid, k_threads, 0, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  return standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_wmma_kernel), k_threads));
}

AISP_REGISTER_VARIANT_WITH_FACTS(
    HgemmProblem, launch, facts, .step = 1, .slug = "wmma", .kind = VariantKind::baseline,
    .summary = "WMMA 16x16x16 bf16, 128x128 block tile via shared memory, "
               "synchronous loads");

}  // namespace aisp::ch10::hgemm::v01
