// ch10:hgemm:07_cluster_multicast — two CTAs of a cluster share each B tile: each loads half of it once
// and the TMA engine writes it into both CTAs' shared memory (multicast).
//
// What changed: in step 06 two CTAs working on tiles of the same column (same B panel) each fetched the
// 256 x 64 B block from L2 on their own. Now CTAs run in 2 x 1 clusters (CUDA guide "Thread Block
// Clusters"; cudaLaunchAttributeClusterDimension) that always work on vertically adjacent tiles
// (rows 2p and 2p + 1, the same columns). Per stage each CTA loads its own 128 x 64 A block and one
// 128 x 64 half of the shared B block with cp.async.bulk.tensor ... .multicast::cluster (PTX ISA
// "cp.async.bulk.tensor"), which lands the half in both CTAs and completes the bytes on both CTAs'
// "full" barriers. Because a producer now writes into its peer's stage too, a stage is "empty" only when
// the consumers of both CTAs have released it: each consumer warpgroup arrives on the empty barrier of
// both CTAs (mapa + mbarrier.arrive.shared::cluster), 4 arrivals per phase.
// Why it should help: each SM requests 32 KiB instead of 48 KiB from L2 per K block; L2 read bandwidth
// and the TMA request rate stop being a shared bottleneck between the tensor cores' demands.
// Napkin math: at 800 TFLOP/s an SM finishes a 128 x 256 x 64 block (4.2 MFLOP) every ~0.69 us and needs
// its 48 KiB in that time: ~70 GB/s per SM, ~9 TB/s from L2 over 132 SMs in step 06, near what the L2
// can deliver. Multicast cuts each SM's requests to 32 KiB per block, ~6 TB/s in all.
// Run: aisp bench run --targets ch10:hgemm:07_cluster_multicast
#include "chapters/ch10_tensor_cores/hgemm/hopper_gemm.cuh"
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v07 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_cluster = 2;    // CTAs per cluster, along M
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order), a multiple of k_cluster
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k * 2, k_b_bytes = k_bn * k_block_k * 2;
constexpr int k_b_half_bytes = k_b_bytes / k_cluster;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_multicast_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
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
        for (int kk = 0; kk < k_block_k / 16; ++kk) {
          wgmma_m64n256k16(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (kb > 0 && signals) release((it - 1) % k_stages);
      }
      wgmma_wait<0>();
      if (signals) release((it - 1) % k_stages);
      store_tile_64x256(d, c, n, row0 + 64 * half, pair.y * k_bn);
    }
  }
  cluster_sync();
}

class ClusterMulticast {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn / k_cluster);  // each CTA loads half a B block
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(hgemm_multicast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
    // As many clusters as can be resident at once (a cluster's CTAs share a GPC, so this can be fewer
    // than sm_count / 2), never more than there are tile pairs.
    cudaLaunchConfig_t config = make_config(a.sm_count, nullptr);
    int clusters = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, hgemm_multicast_kernel, &config));
    const int pairs = (a.m / k_bm / k_cluster) * (a.n / k_bn);
    m_grid = k_cluster * (clusters < pairs ? clusters : pairs);
    if (m_grid == 0) throw std::runtime_error("07_cluster_multicast: no 2-CTA cluster fits on this device");
  }
  void launch(const Args& a, cudaStream_t stream) {
    cudaLaunchConfig_t config = make_config(m_grid, stream);
    AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, hgemm_multicast_kernel, m_map_a, m_map_b, a.c, a.m, a.n, a.k));
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f =
        standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_multicast_kernel), k_threads, k_smem));
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

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, ClusterMulticast, .step = 7, .slug = "cluster_multicast",
                               .kind = VariantKind::step,
                               .summary = "2x1 clusters on adjacent tiles: B halves TMA-multicast to both CTAs, "
                                          "cluster-wide empty barriers; persistent, grouped",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v07
