// ch19:fp8_gemm:07_persistent_promoted — step 06's promoted, block-scaled kernel on a persistent grid:
// one CTA per SM walks the tiles in an L2-friendly order, and the next tile's loads overlap this tile's
// epilogue.
//
// What changed: step 06 launched one CTA per 128 x 128 tile (4096 at 8192, 4x step 04's count of CTAs
// for the same GEMM), each paying its own start-up and ending with an epilogue during which its tensor
// cores idle. Now (as step 04 did for the fast-accumulation kernel) the grid is sm_count CTAs looping
// over tiles t = blockIdx.x, blockIdx.x + gridDim.x, ...; the producer and consumers count K blocks
// across tiles, so the stage ring and mbarrier phases continue from one tile to the next and the
// producer fills stages with the next tile's A and B while the consumers promote, scale and store the
// last one. Tiles are walked 16 tile rows at a time, column by column, so that the tiles in flight
// share their A and B panels in L2: with 128 x 128 tiles and FP8's doubled FLOPs per byte, the CTAs
// together read operands from L2 at ~10 TB/s, close to what the L2 delivers.
// Why it should help: no per-tile launch, fill and drain; a better L2 hit rate for the panels.
// Napkin math (8192^3): 4096 tiles / 132 SMs = 31 waves of 64 K blocks; a tile's fill and epilogue
// (~2-4k clocks) against its ~33k clocks of main loop (64 blocks x ~512 clocks): several percent.
// Run: aisp bench run --targets ch19:fp8_gemm:07_persistent_promoted
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v07 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 128, k_stages = 6;
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order)
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    fp8_persistent_promoted_kernel(const __grid_constant__ CUtensorMap map_a,
                                   const __grid_constant__ CUtensorMap map_b, const float* __restrict__ scale_a,
                                   const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ c, int m, int n,
                                   int k, int scale_block) {
  extern __shared__ unsigned char raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(b_tiles + k_stages * k_b_bytes);
  std::uint64_t* empty = full + k_stages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int tiles_m = m / k_bm, tiles_n = n / k_bn, tiles = tiles_m * tiles_n;
  const int blocks = k / k_block_k;
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;  // K blocks loaded so far, across tiles: picks the stage and the phase
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
        for (int kb = 0; kb < blocks; ++kb, ++it) {
          const int s = it % k_stages;
          mbar_wait(&empty[s], ((it / k_stages) & 1) ^ 1);
          mbar_arrive_expect_tx(&full[s], k_a_bytes + k_b_bytes);
          tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, tile.x * k_bm);
          tma_load(b_tiles + s * k_b_bytes, &map_b, &full[s], kb * k_block_k, tile.y * k_bn);
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int half = warpgroup - 1;
    const int t_in = threadIdx.x % 128;
    const int n_blocks = n / k_scale_block;
    float acc[64];
    float partial[64];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
      const int row_top = tile.x * k_bm + 64 * half + 16 * (t_in / 32) + (t_in % 32) / 4;  // fragment rows
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      for (int kb = 0; kb < blocks; ++kb, ++it) {
        const int s = it % k_stages;
        float sa_top, sa_bottom, sb;
        if (scale_block == 0) {
          sa_top = sa_bottom = scale_a[0];
          sb = scale_b[0];
        } else {
          sa_top = scale_a[static_cast<std::size_t>(kb) * m + row_top];
          sa_bottom = scale_a[static_cast<std::size_t>(kb) * m + row_top + 8];
          sb = scale_b[static_cast<std::size_t>(kb) * n_blocks + tile.y];
        }
        mbar_wait(&full[s], (it / k_stages) & 1);
        const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
        const unsigned char* b = b_tiles + s * k_b_bytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
          wgmma_m64n128k32_e4m3(partial, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        if (t_in == 0) mbar_arrive(&empty[s]);
        const float s_top = sa_top * sb, s_bottom = sa_bottom * sb;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          acc[4 * j] += partial[4 * j] * s_top;
          acc[4 * j + 1] += partial[4 * j + 1] * s_top;
          acc[4 * j + 2] += partial[4 * j + 2] * s_bottom;
          acc[4 * j + 3] += partial[4 * j + 3] * s_bottom;
        }
      }
      store_tile_scaled<128>(acc, 1.0f, c, n, tile.x * k_bm + 64 * half, tile.y * k_bn);
    }
  }
}

class PersistentPromoted {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_persistent_promoted_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    const int tiles = (a.m / k_bm) * (a.n / k_bn);
    const int grid = a.sm_count < tiles ? a.sm_count : tiles;  // one CTA per SM (smem allows no more)
    fp8_persistent_promoted_kernel<<<grid, k_threads, k_smem, stream>>>(
        m_map_a, m_map_b, a.scale_a, a.scale_b, a.c, a.m, a.n, a.k, a.scale_block);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(
        kernel_facts(reinterpret_cast<const void*>(fp8_persistent_promoted_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, PersistentPromoted, .step = 7, .slug = "persistent_promoted",
                               .kind = VariantKind::step,
                               .summary = "step 06 (fp32 promotion, block or per-tensor scales) on a persistent "
                                          "grid of sm_count CTAs, grouped tile order",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v07
