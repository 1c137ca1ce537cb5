// ch19:fp8_gemm:09_promoted_tma_store — step 07's promoted, block-scaled persistent kernel with step 08's
// epilogue: the finished 128 x 128 tile goes through swizzled shared memory and TMA stores.
//
// What changed: step 07 wrote each warpgroup's 64 x 128 promoted accumulators to C with 32 4-byte
// st.global per thread while its tensor cores had nothing queued. Now each consumer warpgroup rounds them
// to bf16 into a 64 x 64 staging tile (two chunks per warpgroup per tile, two staging buffers that
// alternate), fences the writes to the async proxy, meets its warpgroup at a named barrier, and one thread
// issues the TMA store (PTX ISA "cp.async.bulk.tensor", .global.shared::cta), exactly as step 08 does for
// the fast-accumulation kernel. Tile shape (128 x 128: partial + accumulator must fit the registers), 6
// stages, promotion, persistence and tile order are step 07's.
// Why it should help: step 08 showed the stores' cost is larger than their bytes suggest (the README's
// measurements); here a tile's main loop is as short relative to its epilogue as in step 05 (half the K
// work for half the output), but promotion makes the main loop slower, so the gain should be smaller.
// Napkin math (8192^3, H200): 4096 tiles on 132 SMs, 31 waves; 07 takes ~1.25 ms, ~40 us per tile; an
// epilogue of 256 warp-wide STG.32 per tile (~0.5-1 us) is ~2% of that, if the stores cost only their issue.
// Shared memory: 6 stages x 32 KiB + 2 warpgroups x 2 x 8 KiB staging = 224 KiB, + barriers and alignment.
// Run: aisp bench run --targets ch19:fp8_gemm:09_promoted_tma_store
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v09 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 128, k_stages = 6;
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order)
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
// Per consumer warpgroup two 64 x 64 bf16 staging tiles: one filled while the other's store may still read it.
constexpr int k_chunk_cols = 64, k_chunk_bytes = 64 * k_chunk_cols * 2, k_chunk_buffers = 2;
constexpr int k_chunks = k_bn / k_chunk_cols;  // per consumer warpgroup per tile
constexpr int k_staging_bytes = 2 * k_chunk_buffers * k_chunk_bytes;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + k_staging_bytes + 1024 /* alignment */ +
                       2 * k_stages * 8 /* mbarriers */;
static_assert(k_smem <= 227 * 1024, "over the 227 KiB of shared memory a CTA may use on sm_90");

__global__ void __launch_bounds__(k_threads, 1)
    fp8_promoted_tma_store_kernel(const __grid_constant__ CUtensorMap map_a,
                                   const __grid_constant__ CUtensorMap map_b,
                                   const __grid_constant__ CUtensorMap map_c, const float* __restrict__ scale_a,
                                   const float* __restrict__ scale_b, int m, int n, int k, int scale_block) {
  extern __shared__ unsigned char raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  unsigned char* staging = b_tiles + k_stages * k_b_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(staging + k_staging_bytes);
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
    const bool signals = t_in == 0;         // also the thread that issues and waits for the TMA stores
    const int epilogue_barrier = 1 + half;  // a named barrier per consumer warpgroup (0 is __syncthreads)
    unsigned char* my_staging = staging + half * k_chunk_buffers * k_chunk_bytes;
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
        if (signals) mbar_arrive(&empty[s]);
        const float s_top = sa_top * sb, s_bottom = sa_bottom * sb;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          acc[4 * j] += partial[4 * j] * s_top;
          acc[4 * j + 1] += partial[4 * j + 1] * s_top;
          acc[4 * j + 2] += partial[4 * j + 2] * s_bottom;
          acc[4 * j + 3] += partial[4 * j + 3] * s_bottom;
        }
      }
      // The epilogue (kernels/common/hopper.cuh): four 64-column chunks through the two staging buffers,
      // each written to C by a TMA store.
      store_tile_via_staging<k_chunks, k_chunk_buffers>(acc, my_staging, signals, epilogue_barrier, &map_c,
                                                        tile.y * k_bn, tile.x * k_bm + 64 * half);
    }
    // Shared memory must outlive the last stores' reads, and C must be written when the kernel ends.
    if (signals) bulk_wait_group<0>();
  }
}

class PromotedTmaStore {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    m_map_c = make_tensor_map_k_major(a.c, a.m, a.n, 64);  // C in 64 x 64 boxes, step 08's layout
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_promoted_tma_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    const int tiles = (a.m / k_bm) * (a.n / k_bn);
    const int grid = a.sm_count < tiles ? a.sm_count : tiles;  // one CTA per SM (smem allows no more)
    fp8_promoted_tma_store_kernel<<<grid, k_threads, k_smem, stream>>>(
        m_map_a, m_map_b, m_map_c, a.scale_a, a.scale_b, a.m, a.n, a.k, a.scale_block);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(
        kernel_facts(reinterpret_cast<const void*>(fp8_promoted_tma_store_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{}, m_map_c{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, PromotedTmaStore, .step = 9, .slug = "promoted_tma_store",
                               .kind = VariantKind::step,
                               .summary = "07 (fp32 promotion, block or per-tensor scales, persistent) with the "
                                          "epilogue staged in swizzled shared memory and written by TMA stores",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v09
