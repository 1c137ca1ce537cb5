// ch14:autotune — the tiled FP32 GEMM both steps launch, templated on its tile shape (tiles.hpp), and the
// launcher that maps a candidate's index to its instantiation (tiled_sgemm.cu).
//
// C = A B, row-major, any m, n, k (tiles past the edges load zeros and skip their stores). Per block: a
// BM x BN tile of C; per thread: TM rows (contiguous) x TN columns (strided by BN / TN = 16, so a warp's
// shared-memory reads of B and its stores of C are 16 consecutive floats: conflict-free and coalesced).
// Per k step of BK: the block stages A's BM x BK and B's BK x BN tiles in shared memory (A transposed,
// padded by 4 so that the transposing stores hit 32 different banks), then each thread does TM * TN FMAs
// per k from TM + TN shared loads.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace aisp::ch14::autotune {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    tiled_sgemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                       int n, int k) {
  constexpr int threads = (BM / TM) * (BN / TN);
  constexpr int cols = BN / TN;  // threads per row of the thread grid
  constexpr int pad = 4;
  static_assert(BM * BK % threads == 0 && BK * BN % threads == 0, "tile loads split evenly over the threads");
  __shared__ float as[BK][BM + pad];  // as[kk][row]: A's tile, transposed
  __shared__ float bs[BK][BN];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % cols;
  const int ty = tid / cols;
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
    for (int l = 0; l < BM * BK / threads; ++l) {
      const int e = tid + l * threads;
      const int r = e / BK, kk = e % BK;
      const int gr = row0 + r, gk = k0 + kk;
      as[kk][r] = (gr < m && gk < k) ? a[static_cast<std::size_t>(gr) * k + gk] : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < BK * BN / threads; ++l) {
      const int e = tid + l * threads;
      const int kk = e / BN, col = e % BN;
      const int gk = k0 + kk, gc = col0 + col;
      bs[kk][col] = (gk < k && gc < n) ? b[static_cast<std::size_t>(gk) * n + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[TM], rb[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = as[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = bs[kk][tx + j * cols];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
      }
    }
    __syncthreads();  // the next k step overwrites the tiles the slowest warp may still be reading
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = col0 + tx + j * cols;
      if (r < m && col < n) c[static_cast<std::size_t>(r) * n + col] = acc[i][j];
    }
  }
}

// Launches candidate `tile` (an index into k_tiles) on `stream`. Throws on a bad index or launch.
void launch_tile(int tile, const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

// The kernel address of candidate `tile`, for kernel_facts.
const void* tile_kernel(int tile);

}  // namespace aisp::ch14::autotune
