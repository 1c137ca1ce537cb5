// ch10:hgemm:06_persistent — one CTA per SM for the whole GEMM: a tile scheduler hands out tiles in an
// L2-friendly order, and the next tile's loads overlap this tile's epilogue.
//
// What changed: step 05 launched one CTA per 128 x 256 tile (2048 at 8192), and each CTA paid its own
// start-up (barrier init, pipeline fill) and ended with the tensor cores idle while it stored C. Now the
// grid is one CTA per SM (sm_count, from the device) and each CTA loops over tiles t = blockIdx.x,
// blockIdx.x + gridDim.x, ... The producer and consumers count K blocks across tiles, so the stage ring
// and mbarrier phases simply continue: while the consumers write a finished tile's C, the producer is
// already filling the stages with the next tile's A and B. The tile order is grouped: 16 consecutive
// tile rows (M) are walked column by column, so that the ~132 tiles in flight at once share a 16 x ~8
// block of A and B panels in L2 instead of sweeping all of A.
// Why it should help: no per-tile launch/fill cost, the epilogue hides under loads, fewer DRAM bytes.
// Napkin math: a 132-tile wave in row order reads all 64 A panels (128 MiB at 8192) per wave; grouped by
// 16 it reads 16 A and ~8 B panels (~48 MiB): well inside L2 bandwidth either way, but the grouped
// order keeps the working set near the 50 MB L2.
// Run: aisp bench run --targets ch10:hgemm:06_persistent
#include "chapters/ch10_tensor_cores/hgemm/hopper_gemm.cuh"
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v06 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order)
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k * 2, k_b_bytes = k_bn * k_block_k * 2;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_persistent_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                            __nv_bfloat16* __restrict__ c, int m, int n, int k) {
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
    const bool signals = threadIdx.x % 128 == 0;
    float d[128];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
      for (int kb = 0; kb < blocks; ++kb, ++it) {
        const int s = it % k_stages;
        mbar_wait(&full[s], (it / k_stages) & 1);
        const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
        const unsigned char* b = b_tiles + s * k_b_bytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < k_block_k / 16; ++kk) {
          wgmma_m64n256k16(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (kb > 0 && signals) mbar_arrive(&empty[(it - 1) % k_stages]);
      }
      wgmma_wait<0>();
      // Free the tile's last stage before the epilogue: the producer refills it with the next tile's data
      // while these registers go out to C.
      if (signals) mbar_arrive(&empty[(it - 1) % k_stages]);
      store_tile_64x256(d, c, n, tile.x * k_bm + 64 * half, tile.y * k_bn);
    }
  }
}

class Persistent {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(hgemm_persistent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    const int tiles = (a.m / k_bm) * (a.n / k_bn);
    const int grid = a.sm_count < tiles ? a.sm_count : tiles;  // one CTA per SM (smem allows no more)
    hgemm_persistent_kernel<<<grid, k_threads, k_smem, stream>>>(m_map_a, m_map_b, a.c, a.m, a.n, a.k);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_persistent_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, Persistent, .step = 6, .slug = "persistent", .kind = VariantKind::step,
                               .summary = "persistent grid of sm_count CTAs, grouped tile order, next tile's loads "
                                          "overlap the epilogue",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v06
