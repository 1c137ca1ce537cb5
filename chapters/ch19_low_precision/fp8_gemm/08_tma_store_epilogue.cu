// ch19:fp8_gemm:08_tma_store_epilogue — the scaled epilogue goes through shared memory and TMA stores, so
// the consumers hand a finished tile to the TMA engine and return to the tensor cores at once.
//
// What changed: in step 05 each consumer warpgroup scaled its 64 x 256 accumulators and wrote them to C
// with 64 4-byte st.global per thread; while those stores went out, the CTA's tensor cores had nothing
// queued (only the producer's loads of the next tile overlapped). Now (ch10:hgemm's step 08, with FP8
// operands and the per-tensor scale) each consumer warpgroup multiplies by sa * sb, rounds to bf16 into a
// 64 x 64 staging tile in shared memory (128-byte swizzled: free of bank conflicts), fences it to the
// async proxy (fence.proxy.async), meets its own warpgroup at a named barrier, and one thread issues
// cp.async.bulk.tensor ... .global.shared::cta (a TMA store, PTX ISA "cp.async.bulk.tensor") of the
// 64 x 64 box. Four chunks cover the warpgroup's 64 x 256; two staging tiles per warpgroup alternate, and a
// staging tile is rewritten only after its previous store has read it (cp.async.bulk.wait_group.read 1).
// The global writes drain under the next tile's main loop. Tile shape, stages, persistence, grouped order
// and the 2 x 1 multicast of B are step 05's, unchanged.
// Why it should help more than in bf16: an FP8 tile's main loop is half as long as bf16's for the same
// epilogue, so the epilogue is twice the share of a tile. The README's H100 profile of step 04 shows the
// consumers' second stall reason is long scoreboard from these stores (2.8 warps per issue).
// Napkin math (4096^3, H200): 512 tiles on 132 SMs is 3.9 waves, so the busiest SM runs 4 tiles: 05's
// 113.7 us is ~28 us per tile, against ~21 us for a tile's 268 MFLOP at the measured FP8 ceiling (~1,700
// TFLOP/s over 132 SMs). 05's epilogue, 512 warp-wide STG.32 per tile (~2-4k clocks, 1-2 us), is part of
// that gap; here the consumers issue 512 conflict-free STS.32 per tile (~0.3 us) and 8 TMA stores drain in
// the background. If the epilogue is the cause: +4-6% at 4096, about half that at 8192, where a tile has
// twice the K work; the rest of the gap (the drain of each tile's last wgmma group, the 3.9-wave tail)
// it does not touch.
// Shared memory: 4 stages x 48 KiB + 2 warpgroups x 2 x 8 KiB staging = 224 KiB, + barriers and 1 KiB of
// alignment, under the 227 KiB a CTA may have (the same budget as ch10:hgemm's step 08: an FP8 stage has
// the same bytes as a bf16 one).
// Run: aisp bench run --targets ch19:fp8_gemm:08_tma_store_epilogue
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v08 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_cluster = 2;    // CTAs per cluster, along M
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order), a multiple of k_cluster
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_b_half_bytes = k_b_bytes / k_cluster;
// Per consumer warpgroup two 64 x 64 bf16 staging tiles: one filled while the other's store may still read it.
constexpr int k_chunk_cols = 64, k_chunk_bytes = 64 * k_chunk_cols * 2, k_chunk_buffers = 2;
constexpr int k_chunks = k_bn / k_chunk_cols;  // per consumer warpgroup per tile
constexpr int k_staging_bytes = 2 * k_chunk_buffers * k_chunk_bytes;
constexpr int k_smem =
    k_stages * (k_a_bytes + k_b_bytes) + k_staging_bytes + 1024 /* alignment */ + 128 /* 8 mbarriers */;
static_assert(k_smem <= 227 * 1024, "over the 227 KiB of shared memory a CTA may use on sm_90");

__global__ void __launch_bounds__(k_threads, 1)
    fp8_tma_store_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                         const __grid_constant__ CUtensorMap map_c, const float* __restrict__ scale_a,
                         const float* __restrict__ scale_b, int m, int n, int k) {
  extern __shared__ unsigned char raw[];
  // Same offsets in both CTAs (same kernel, same dynamic smem base), which multicast and mapa rely on.
  // Every tile and staging buffer is a multiple of 1024 bytes from a 1024-aligned base (the swizzle atom).
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  unsigned char* staging = b_tiles + k_stages * k_b_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(staging + k_staging_bytes);
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
    const bool signals = threadIdx.x % 128 == 0;  // also the thread that issues and waits for the TMA stores
    const int epilogue_barrier = 1 + half;        // a named barrier per consumer warpgroup (0 is __syncthreads)
    unsigned char* my_staging = staging + half * k_chunk_buffers * k_chunk_bytes;
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

      // The epilogue (kernels/common/hopper.cuh): four 64-column chunks through the two staging buffers,
      // each written to C by a TMA store.
      store_tile_via_staging<k_chunks, k_chunk_buffers>(d, my_staging, signals, epilogue_barrier, &map_c,
                                                        pair.y * k_bn, row0 + 64 * half, scale);
    }
    // Shared memory must outlive the last stores' reads, and C must be written when the kernel ends.
    if (signals) bulk_wait_group<0>();
  }
  cluster_sync();
}

class TmaStoreEpilogue {
 public:
  void setup(const Args& a, cudaStream_t) {
    if (a.scale_block != 0) {
      throw VariantUnavailable("per-tensor scales only: block scales must be applied inside the K loop (step 06)");
    }
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn / k_cluster);  // each CTA loads half a B block
    // C (M x N bf16, N contiguous) has the 2-D shape of a K-major bf16 operand: boxes of 64 rows x 64
    // columns (128 bytes, one swizzle row), the layout stage_chunk_64x64 writes.
    m_map_c = make_tensor_map_k_major(a.c, a.m, a.n, 64);
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_tma_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
    // As many clusters as can be resident at once (a cluster's CTAs share a GPC, so this can be fewer
    // than sm_count / 2), never more than there are tile pairs.
    cudaLaunchConfig_t config = make_config(a.sm_count, nullptr);
    int clusters = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, fp8_tma_store_kernel, &config));
    const int pairs = (a.m / k_bm / k_cluster) * (a.n / k_bn);
    m_grid = k_cluster * (clusters < pairs ? clusters : pairs);
    if (m_grid == 0) throw std::runtime_error("08_tma_store_epilogue: no 2-CTA cluster fits on this device");
  }
  void launch(const Args& a, cudaStream_t stream) {
    cudaLaunchConfig_t config = make_config(m_grid, stream);
    AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, fp8_tma_store_kernel, m_map_a, m_map_b, m_map_c, a.scale_a,
                                       a.scale_b, a.m, a.n, a.k));
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f =
        standard_facts(kernel_facts(reinterpret_cast<const void*>(fp8_tma_store_kernel), k_threads, k_smem));
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

  CUtensorMap m_map_a{}, m_map_b{}, m_map_c{};
  cudaLaunchAttribute m_attr{};
  int m_grid = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, TmaStoreEpilogue, .step = 8, .slug = "tma_store_epilogue",
                               .kind = VariantKind::optimized,
                               .summary = "05 with the scaled epilogue staged in swizzled shared memory and written "
                                          "by TMA stores, so consumers return to wgmma at once; per-tensor scales",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v08
