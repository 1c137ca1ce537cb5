// ch10:cluster_reduction:02_cluster_dsmem — 8 blocks of a cluster add their sums through distributed
// shared memory; one atomicAdd per cluster (optimized).
//
// What changed: the blocks are launched in clusters of 8 (cudaLaunchKernelEx with
// cudaLaunchAttributeClusterDimension; CUDA programming guide, "Thread Block Clusters"), the grid rounded
// up to whole clusters (the extra blocks' tiles lie past n: they add zeros). Each block reduces its tile
// exactly as in step 01, but thread 0 writes the block's sum to its own shared memory instead of adding
// it to the result. cluster.sync() then makes the 8 writes visible cluster-wide; warp 0 of block rank 0
// reads the 8 sums through cluster.map_shared_rank() (distributed shared memory: the SM-to-SM network
// inside the GPC, guide section "Distributed Shared Memory"), adds them with shuffles and does the one
// atomicAdd. A second cluster.sync() keeps every block, and so its shared memory, alive until rank 0 has
// read it: a block's shared memory must not be accessed after the block exits (same guide section).
// Why it helps: the result's address takes tiles / 8 atomics instead of tiles, so the L2 queue that
// bounded step 01 at small tiles is 8 times shorter. The price: two cluster barriers per block, and the
// scheduler must place the 8 blocks of a cluster together in one GPC.
// Napkin math at n = 2^28: 4 items per thread -> 32,768 atomics, ~57 us at ~1.75 ns each, under the ~0.25
// ms of DRAM time, so the DRAM read ceiling becomes the bound (up to ~1.8x over step 01's ~0.46 ms); at 16
// items and more both steps are DRAM-bound and this one should tie (or lose a little to the barriers).
// Run: aisp bench run --targets ch10:cluster_reduction:02_cluster_dsmem
#include <cooperative_groups.h>

#include "chapters/ch10_tensor_cores/cluster_reduction/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::cluster_reduction::v02 {

namespace cg = cooperative_groups;

constexpr int k_threads = k_block_threads;
constexpr int k_warps = k_threads / 32;
constexpr int k_cluster = k_cluster_blocks;
static_assert(k_cluster <= 32, "rank 0's warp 0 reads one block sum per lane");

// After it, lane 0 holds the sum of the warp's 32 values (the other lanes hold partial sums).
__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Float4 number i of x; the one that straddles the end (i == n / 4) holds the last n % 4 values, zeros
// after them; later ones (the last tile's padding) are all zero.
__device__ float4 load_vec(const float* __restrict__ x, std::size_t i, std::size_t n) {
  const std::size_t n4 = n / 4;
  if (i < n4) return reinterpret_cast<const float4*>(x)[i];  // cudaMalloc memory is 256-byte aligned
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (i == n4) {
    const std::size_t j = 4 * i;
    if (j < n) v.x = x[j];
    if (j + 1 < n) v.y = x[j + 1];
    if (j + 2 < n) v.z = x[j + 2];
  }
  return v;
}

// The tiles are step 01's. Every thread of every block reaches both cluster barriers (no early exit:
// barrier.cluster counts every thread of the cluster).
template <int k_items>
__global__ void __launch_bounds__(k_threads) sum_cluster_kernel(const float* __restrict__ x,
                                                                 float* __restrict__ out, std::size_t n) {
  constexpr int k_vecs = k_items / 4;
  __shared__ float warp_sums[k_warps];
  __shared__ float block_sum;  // read by the cluster's rank 0 through distributed shared memory
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * (k_threads * k_vecs) + threadIdx.x;
  float4 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) v[k] = load_vec(x, first + k * k_threads, n);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  s = warp_sum(s);
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (warp == 0) {
    const float block = warp_sum(lane < k_warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) block_sum = block;
  }

  // Release/acquire across the cluster: every block's block_sum is written and visible (and every block
  // of the cluster is running) once all threads have arrived.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  if (cluster.block_rank() == 0 && warp == 0) {
    const float partial = lane < k_cluster ? *cluster.map_shared_rank(&block_sum, lane) : 0.0f;
    const float total = warp_sum(partial);
    if (lane == 0) atomicAdd(out, total);
  }
  cluster.sync();  // no block exits (freeing its shared memory) before rank 0 has read it
}

template <int k_items>
void launch_items(const Args& a, unsigned grid, cudaStream_t stream) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = k_cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(k_threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, sum_cluster_kernel<k_items>, a.x, a.out, a.n));
}

// Whole clusters: the grid rounded up to a multiple of 8 (problem.hpp checked that it fits in gridDim.x).
unsigned cluster_grid(const Args& a) {
  const std::size_t tiles = tile_count(a.n, a.items_per_thread);
  return static_cast<unsigned>((tiles + k_cluster - 1) / k_cluster * k_cluster);
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  const unsigned grid = cluster_grid(a);
  switch (a.items_per_thread) {  // problem.hpp admits only these five
    case 4: launch_items<4>(a, grid, stream); break;
    case 8: launch_items<8>(a, grid, stream); break;
    case 16: launch_items<16>(a, grid, stream); break;
    case 32: launch_items<32>(a, grid, stream); break;
    default: launch_items<64>(a, grid, stream); break;
  }
  AISP_CHECK_LAUNCH();
}

template <int k_items>
std::vector<Fact> facts_items(const Args& a) {
  const auto kernel = sum_cluster_kernel<k_items>;
  std::vector<Fact> f = standard_facts(kernel_facts(reinterpret_cast<const void*>(kernel), k_threads));
  // How many clusters the GPU holds at once: the cluster's 8 blocks must fit in one GPC together.
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = k_cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster_grid(a));
  config.blockDim = dim3(k_threads);
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  f.push_back({"max_active_clusters", std::to_string(clusters)});
  f.push_back({"atomics", std::to_string(cluster_grid(a) / k_cluster)});
  return f;
}

std::vector<Fact> facts(const Args& a) {
  switch (a.items_per_thread) {
    case 4: return facts_items<4>(a);
    case 8: return facts_items<8>(a);
    case 16: return facts_items<16>(a);
    case 32: return facts_items<32>(a);
    default: return facts_items<64>(a);
  }
}

AISP_REGISTER_VARIANT_WITH_FACTS(ClusterReductionProblem, launch, facts, .step = 2, .slug = "cluster_dsmem",
                                 .kind = VariantKind::step,
                                 .summary = "clusters of 8 blocks add their sums through DSMEM: one atomicAdd per cluster",
                                 .min_cc = 90);

}  // namespace aisp::ch10::cluster_reduction::v02
