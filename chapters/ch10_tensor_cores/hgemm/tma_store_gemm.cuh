// ch10:hgemm — the ladder's fastest kernel, step 08's (08_tma_store_epilogue.cu explains it: step 07's
// 2 x 1-cluster, multicast, persistent 128 x 256 wgmma GEMM with the epilogue staged in shared memory and
// written by TMA stores), in a header because the serving engine runs it too: serving/gpu/tile_gemm.cu
// offers it to the runner as a GEMM candidate beside cuBLASLt, timed per shape at start-up. One copy, so
// that the engine's kernel is the ladder's. Each includer wraps gemm_tiles() in its own __global__ with
// __launch_bounds__(k_threads, 1) (setmaxnreg needs that register cap at entry) and launches it in 2 x 1
// clusters with k_smem bytes of dynamic shared memory (launch_config()).
#pragma once

#include <string>

#include "chapters/ch10_tensor_cores/hgemm/hopper_gemm.cuh"

namespace aisp::ch10::hgemm::store_epilogue {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_cluster = 2;    // CTAs per cluster, along M
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order), a multiple of k_cluster
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k * 2, k_b_bytes = k_bn * k_block_k * 2;
constexpr int k_b_half_bytes = k_b_bytes / k_cluster;
// The epilogue's staging: per consumer warpgroup two 64 x 64 bf16 tiles (one being filled while the other's
// TMA store may still be reading it).
constexpr int k_chunk_cols = 64, k_chunk_bytes = 64 * k_chunk_cols * 2, k_chunk_buffers = 2;
constexpr int k_chunks = k_bn / k_chunk_cols;  // per consumer warpgroup per tile
constexpr int k_staging_bytes = 2 * k_chunk_buffers * k_chunk_bytes;
constexpr int k_smem =
    k_stages * (k_a_bytes + k_b_bytes) + k_staging_bytes + 1024 /* alignment */ + 128 /* 8 mbarriers */;
static_assert(k_smem <= 227 * 1024, "over the 227 KiB of shared memory a CTA may use on sm_90");
static_assert(k_chunk_cols * 2 == 128, "a staging row is one 128-byte swizzle row");


// What the kernel computes without tails: 2 x 1 clusters of 128 x 256 tiles, K blocks of 64.
inline bool supports(int m, int n, int k) {
  return m > 0 && n > 0 && k > 0 && m % (k_bm * k_cluster) == 0 && n % k_bn == 0 && k % k_block_k == 0;
}

// The persistent loop of one CTA: C = A * B^T over the tile pairs it is dealt in the grouped order. A and
// B are K-major tensor maps with boxes of 128 x 64 (A) and 128 x 64 (half of a B block); C is M x N with
// boxes of 64 x 64 (make_tensor_map_k_major(c, m, n, 64): the same 2-D shape and swizzle).
__device__ __forceinline__ void gemm_tiles(const CUtensorMap& map_a, const CUtensorMap& map_b,
                                           const CUtensorMap& map_c, int m, int n, int k) {
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

      // The epilogue (kernels/common/hopper.cuh): four 64-column chunks through the two staging buffers,
      // each written to C by a TMA store.
      store_tile_via_staging<k_chunks, k_chunk_buffers>(d, my_staging, signals, epilogue_barrier, &map_c,
                                                        pair.y * k_bn, row0 + 64 * half);
    }
    // Shared memory must outlive the last stores' reads, and the kernel's writes to C must be complete
    // when it ends.
    if (signals) bulk_wait_group<0>();
  }
  cluster_sync();
}

// ---- host ----------------------------------------------------------------------------------------------

// A launch of `grid` CTAs in 2 x 1 clusters with the kernel's shared memory; `attr` must outlive the
// launch call (the config points at it).
inline cudaLaunchConfig_t launch_config(int grid, cudaStream_t stream, cudaLaunchAttribute& attr) {
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = k_cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(k_threads);
  config.dynamicSmemBytes = k_smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return config;
}

// Prepares `kernel` (a __global__ wrapping gemm_tiles) and returns how many of its 2-CTA clusters can be
// resident at once (a cluster's CTAs share a GPC, so this can be fewer than sm_count / 2). Throws if none.
template <class Kernel>
int resident_clusters(Kernel kernel, int sm_count) {
  AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = launch_config(sm_count, nullptr, attr);
  int clusters = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  if (clusters == 0) throw std::runtime_error("ch10:hgemm TMA-store GEMM: no 2-CTA cluster fits on this device");
  return clusters;
}

// The persistent grid for an m x n output: every resident cluster, never more than there are tile pairs.
inline int persistent_grid(int clusters, int m, int n) {
  const int pairs = (m / k_bm / k_cluster) * (n / k_bn);
  return k_cluster * (clusters < pairs ? clusters : pairs);
}

}  // namespace aisp::ch10::hgemm::store_epilogue
