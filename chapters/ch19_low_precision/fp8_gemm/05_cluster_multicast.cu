// ch19:fp8_gemm:05_cluster_multicast — two CTAs of a cluster share each B tile: each loads half of it once
// and the TMA engine writes it into both CTAs' shared memory (multicast).
//
// What changed: step 04's CTAs working on tiles of the same column each fetched the 256 x 128 B block
// from L2 on their own. Now (ch10:hgemm's step 07, with FP8 operands) CTAs run in 2 x 1 clusters (CUDA
// guide "Thread Block Clusters"; cudaLaunchAttributeClusterDimension) on vertically adjacent tiles. Per
// stage each CTA loads its own 128 x 128 A block and one 128 x 128 half of the shared B block with
// cp.async.bulk.tensor ... .multicast::cluster (PTX ISA "cp.async.bulk.tensor"), which lands the half in
// both CTAs and completes the bytes on both CTAs' "full" barriers. A stage is "empty" only when the
// consumers of both CTAs have released it (mapa + mbarrier.arrive.shared::cluster, 4 arrivals a phase).
// Why it should help more than in bf16: an FP8 K block has twice the FLOPs per byte of operands on the
// tensor cores, so for the same bytes from L2 per block the SMs ask twice as often: step 04 reads ~48 KiB
// per SM every ~1024 clocks at full rate, ~11 TB/s over 132 SMs, beyond what the L2 delivers. cuBLASLt's
// FP8 kernels on this GPU run 1 x 2 clusters (their names, in the profile of step 04's README section).
// Napkin math: 32 instead of 48 KiB per SM per K block: ~7.5 TB/s from L2 at the FP8 rate.
// Run: aisp bench run --targets ch19:fp8_gemm:05_cluster_multicast
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v05 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_cluster = 2;    // CTAs per cluster, along M
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order), a multiple of k_cluster
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_b_half_bytes = k_b_bytes / k_cluster;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    fp8_multicast_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                         const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                         __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  extern __shared__ unsigned char raw[];
  // Same offsets in both CTAs (same kernel, same dynamic smem base), which multicast and mapa rely on.
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(b_tiles + k_stages * k_b_bytes);
  std::uint64_t* empty = full + k_stages;

  const unsigned rank = cluster_rank();
  if (threadIdx.x == 0) {
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2 * k_cluster);  // both consumer warpgroups of both CTAs
    }
    fence_barrier_init();
  }
  cluster_sync();

  const int pairs_m = m / k_bm / k_cluster, tiles_n = n / k_bn, pairs = pairs_m * tiles_n;
  const int cluster_id = blockIdx.x / k_cluster, clusters = gridDim.x / k_cluster;
  const int blocks = k / k_block_k;
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int p = cluster_id; p < pairs; p += clusters) {
        const int2 pair = grouped_tile_coords(p, pairs_m, tiles_n, k_group_m / k_cluster);
        const int row0 = (pair.x * k_cluster + static_cast<int>(rank)) * k_bm;
        for (int kb = 0; kb < blocks; ++kb, ++it) {
          const int s = it % k_stages;
          mbar_wait(&empty[s], ((it / k_stages) & 1) ^ 1);  // both CTAs' consumers are done with stage s
          mbar_arrive_expect_tx(&full[s], k_a_bytes + k_b_bytes);  // own A + both halves of B
          tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, row0);
          tma_load_multicast(b_tiles + s * k_b_bytes + rank * k_b_half_bytes, &map_b, &full[s], kb * k_block_k,
                             pair.y * k_bn + static_cast<int>(rank) * (k_bn / k_cluster), (1u << k_cluster) - 1);
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int half = warpgroup - 1;
    const bool signals = threadIdx.x % 128 == 0;
    const auto release = [&](int s) {
      for (unsigned r = 0; r < k_cluster; ++r) mbar_arrive_cluster(&empty[s], r);
    };
    const float scale = scale_a[0] * scale_b[0];
    float d[128];
    int it = 0;
    for (int p = cluster_id; p < pairs; p += clusters) {
      const int2 pair = grouped_tile_coords(p, pairs_m, tiles_n, k_group_m / k_cluster);
      const int row0 = (pair.x * k_cluster + static_cast<int>(rank)) * k_bm;
      for (int kb = 0; kb < blocks; ++kb, ++it) {
        const int s = it % k_stages;
        mbar_wait(&full[s], (it / k_stages) & 1);
        const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
        const unsigned char* b = b_tiles + s * k_b_bytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
          wgmma_m64n256k32_e4m3(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (kb > 0 && signals) release((it - 1) % k_stages);
      }
      wgmma_wait<0>();
      if (signals) release((it - 1) % k_stages);
      store_tile_scaled<256>(d, scale, c, n, row0 + 64 * half, pair.y * k_bn);
    }
  }
  cluster_sync();
}

class ClusterMulticast {
 public:
  void setup(const Args& a, cudaStream_t) {
    if (a.scale_block != 0) {
      throw VariantUnavailable("per-tensor scales only: block scales must be applied inside the K loop (step 06)");
    }
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn / k_cluster);  // each CTA loads half a B block
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_multicast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
    // As many clusters as can be resident at once (a cluster's CTAs share a GPC, so this can be fewer
    // than sm_count / 2), never more than there are tile pairs.
    cudaLaunchConfig_t config = make_config(a.sm_count, nullptr);
    int clusters = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, fp8_multicast_kernel, &config));
    const int pairs = (a.m / k_bm / k_cluster) * (a.n / k_bn);
    m_grid = k_cluster * (clusters < pairs ? clusters : pairs);
    if (m_grid == 0) throw std::runtime_error("05_cluster_multicast: no 2-CTA cluster fits on this device");
  }
  void launch(const Args& a, cudaStream_t stream) {
    cudaLaunchConfig_t config = make_config(m_grid, stream);
    AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, fp8_multicast_kernel, m_map_a, m_map_b, a.scale_a, a.scale_b, a.c, a.m,
                                       a.n, a.k));
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f =
        standard_facts(kernel_facts(reinterpret_cast<const void*>(fp8_multicast_kernel), k_threads, k_smem));
    f.push_back({"grid", std::to_string(m_grid)});
    return f;
  }

 private:
  cudaLaunchConfig_t make_config(int grid, cudaStream_t stream) {
    m_attr.id = cudaLaunchAttributeClusterDimension;
    m_attr.val.clusterDim.x = k_cluster;
    m_attr.val.clusterDim.y = 1;
    m_attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(k_threads);
    config.dynamicSmemBytes = k_smem;
    config.stream = stream;
    config.attrs = &m_attr;
    config.numAttrs = 1;
    return config;
  }

  CUtensorMap m_map_a{}, m_map_b{};
  cudaLaunchAttribute m_attr{};
  int m_grid = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, ClusterMulticast, .step = 5, .slug = "cluster_multicast",
                               .kind = VariantKind::step,
                               .summary = "2x1 clusters on adjacent tiles: B halves TMA-multicast to both CTAs, "
                                          "cluster-wide empty barriers; persistent, grouped; per-tensor scales",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v05
