// The kernel of ch09:sgemm:08_double_buffer, templated on its tile sizes and on an epilogue functor so that
// ch09:fused_epilogue runs the very same GEMM with bias + GELU applied to the accumulators (its 02_fused).
// Read 08_double_buffer.cu first: it says what the kernel does and why.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

namespace aisp::ch09 {

// C = acc: the plain GEMM.
struct NoEpilogue {
  __device__ float operator()(float acc, int /*col*/) const { return acc; }
};

// The geometry every variant of the kernel shares. A block tile BM x BN is split into warp tiles WM x WN;
// inside a warp, lanes form an 8 (m) x 4 (n) grid and each lane owns 4 x 4 sub-tiles repeated every 32
// rows and every 16 columns, so one LDS.128 instruction of the warp reads 8 (A) or 4 (B) distinct,
// contiguous float4s: each a broadcast to 4 or 8 lanes, no bank conflicts.
template <int BM_, int BN_, int BK_, int WM_, int WN_>
struct WarpTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
  static constexpr int warps = (BM / WM) * (BN / WN);
  static constexpr int threads = 32 * warps;
  static constexpr int m_iter = WM / 32;  // sub-tiles per lane along m: 8 lane rows x 4 rows each
  static constexpr int n_iter = WN / 16;  // along n: 4 lane columns x 4 columns each
  static constexpr int TM = 4 * m_iter, TN = 4 * n_iter;  // outputs per thread: TM x TN
  static constexpr int a_loads = BM * BK / 4 / threads;    // float4s of A per thread per tile
  static constexpr int b_loads = BK * BN / 4 / threads;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 32 == 0 && WN % 16 == 0, "warp tiling");
  static_assert(a_loads * threads * 4 == BM * BK && b_loads * threads * 4 == BK * BN, "whole tiles");
  static_assert(BM % 32 == 0 && BK % 4 == 0, "A is moved as 32-row x 4-k pieces, one per warp");
  // Pass l of a thread moves the same rows of A a_pass_quads k-quads further on, and the same columns of
  // B b_pass_rows rows further down: both need whole passes.
  static_assert(warps % (BM / 32) == 0 && threads % (BN / 4) == 0, "passes keep rows and columns");
  static constexpr int a_pass_quads = warps / (BM / 32);
  static constexpr int b_pass_rows = threads / (BN / 4);
};

template <class T, int MIN_BLOCKS, class Epilogue>
__global__ void __launch_bounds__(T::threads, MIN_BLOCKS)
    sgemm_pipelined_kernel(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int n, int k, Epilogue epilogue) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, WM = T::WM, WN = T::WN, TM = T::TM, TN = T::TN;
  // Two stages of each tile: the block computes on one while the other is being filled.
  __shared__ __align__(16) float as[2][BK][BM];  // transposed: as[s][p][r] = A[r][k0 + p]
  __shared__ __align__(16) float bs[2][BK][BN];

  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int warp_m = warp / (BN / WN), warp_n = warp % (BN / WN);
  const int lane_m = lane / 4, lane_n = lane % 4;
  a += static_cast<std::size_t>(blockIdx.y) * BM * k;
  b += blockIdx.x * BN;

  // Global -> registers -> shared, in two halves so that the loads of tile i+1 are in flight while tile i
  // is computed. A piece of A is 32 rows x one k-quad, taken by one warp: the transposing scalar stores
  // then hit 32 consecutive words (conflict-free). B moves as row-major float4s, BN / 4 threads per row.
  // Every thread keeps its row and column across the passes l (see WarpTile), so one pointer per operand
  // walks k and the passes are fixed offsets from it: few registers spent on addresses.
  const int a_row = (warp % (BM / 32)) * 32 + lane, a_quad = warp / (BM / 32);
  const int b_row = t / (BN / 4), b_col = (t % (BN / 4)) * 4;
  const float* a_next = a + static_cast<std::size_t>(a_row) * k + 4 * a_quad;
  const float* b_next = b + static_cast<std::size_t>(b_row) * n + b_col;
  const std::size_t b_pass_stride = static_cast<std::size_t>(T::b_pass_rows) * n;
  float4 stage_a[T::a_loads], stage_b[T::b_loads];
  auto load_tiles = [&]() {
#pragma unroll
    for (int l = 0; l < T::a_loads; ++l) {
      stage_a[l] = *reinterpret_cast<const float4*>(a_next + 4 * l * T::a_pass_quads);
    }
#pragma unroll
    for (int l = 0; l < T::b_loads; ++l) {
      stage_b[l] = *reinterpret_cast<const float4*>(b_next + l * b_pass_stride);
    }
    a_next += BK;
    b_next += static_cast<std::size_t>(BK) * n;
  };
  auto store_tiles = [&](int s) {
#pragma unroll
    for (int l = 0; l < T::a_loads; ++l) {
      const int p = 4 * (a_quad + l * T::a_pass_quads);
      as[s][p + 0][a_row] = stage_a[l].x;
      as[s][p + 1][a_row] = stage_a[l].y;
      as[s][p + 2][a_row] = stage_a[l].z;
      as[s][p + 3][a_row] = stage_a[l].w;
    }
#pragma unroll
    for (int l = 0; l < T::b_loads; ++l) {
      *reinterpret_cast<float4*>(&bs[s][b_row + l * T::b_pass_rows][b_col]) = stage_b[l];
    }
  };

  float acc[TM][TN] = {};
  load_tiles();
  store_tiles(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < k; k0 += BK) {
    const bool more = k0 + BK < k;
    if (more) load_tiles();  // LDGs issued now, consumed only after the FMAs below
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      float reg_a[TM], reg_b[TN];
#pragma unroll
      for (int im = 0; im < T::m_iter; ++im) {
        *reinterpret_cast<float4*>(&reg_a[4 * im]) =
            *reinterpret_cast<const float4*>(&as[s][p][warp_m * WM + im * 32 + lane_m * 4]);
      }
#pragma unroll
      for (int jn = 0; jn < T::n_iter; ++jn) {
        *reinterpret_cast<float4*>(&reg_b[4 * jn]) =
            *reinterpret_cast<const float4*>(&bs[s][p][warp_n * WN + jn * 16 + lane_n * 4]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(reg_a[i], reg_b[j], acc[i][j]);
      }
    }
    // The other stage was last read before the previous barrier, so it can be overwritten now; one barrier
    // per tile then publishes it (and retires this stage) before the next iteration.
    if (more) store_tiles(s ^ 1);
    __syncthreads();
    s ^= 1;
  }

  // Each lane writes its sub-tiles as float4s: per instruction a warp covers 8 rows x 64 contiguous bytes.
  const int tile_row = blockIdx.y * BM + warp_m * WM + lane_m * 4;
  const int tile_col = blockIdx.x * BN + warp_n * WN + lane_n * 4;
#pragma unroll
  for (int im = 0; im < T::m_iter; ++im) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::size_t row = static_cast<std::size_t>(tile_row + im * 32 + i);
#pragma unroll
      for (int jn = 0; jn < T::n_iter; ++jn) {
        const int col = tile_col + jn * 16;
        const float* v = &acc[4 * im + i][4 * jn];
        *reinterpret_cast<float4*>(&c[row * n + col]) =
            make_float4(epilogue(v[0], col), epilogue(v[1], col + 1), epilogue(v[2], col + 2),
                        epilogue(v[3], col + 3));
      }
    }
  }
}

}  // namespace aisp::ch09

namespace aisp::ch09 {

// The tile table of ch09:sgemm:09_tuned_tiles: the tiles a sweep picked per compute capability (README
// "Tuning"), and step 08's tiles where nothing was measured. Calls f(tiles, min_blocks) with a WarpTile
// and a std::integral_constant<int, MIN_BLOCKS>, so that f can instantiate the kernel with them.
template <class F>
void with_tuned_tiles(int cc, F&& f) {
  if (cc == 90) {
    // H100/H200 (sm_90): 128 x 128 x 8 block tiles of four 64 x 64 warp tiles, 8 x 16 outputs per thread,
    // 2 blocks per SM.
    f(WarpTile<128, 128, 8, 64, 64>{}, std::integral_constant<int, 2>{});
  } else {
    f(WarpTile<128, 128, 16, 64, 32>{}, std::integral_constant<int, 2>{});
  }
}

}  // namespace aisp::ch09
