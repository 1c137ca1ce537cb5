// ch10:cluster_softmax:03_cluster_dsmem — a row's 8 blocks form a thread block cluster: each keeps its
// chunk in registers, and the chunks' (max, sum) pairs meet in distributed shared memory (optimized).
//
// What changed: where the pairs meet, and so how often the row is read. The 8 blocks of a row are
// launched as one cluster (cudaLaunchKernelEx with cudaLaunchAttributeClusterDimension; CUDA programming
// guide, "Thread Block Clusters"), which the hardware runs at the same time on SMs of one GPC. Each block
// loads its chunk into registers (vectors_per_thread 16-byte vectors per thread, all loads in flight
// together), reduces it to its max and its sum of exp(x - max), and writes that pair to its own shared
// memory. cluster.sync() makes the 8 pairs visible cluster-wide (release/acquire); warp 0 of every block
// reads them through cluster.map_shared_rank() (distributed shared memory: the SM-to-SM network inside
// the GPC, guide section "Distributed Shared Memory") and merges them as step 02's second kernel does.
// The chunk is still in registers: the block writes exp(x - M) / S from there. No second kernel, no
// second read: x comes from DRAM once and y goes once, the minimum traffic.
// The rules it keeps: a block's shared memory must not be read after that block exits (same guide
// section), so each block arrives on the cluster barrier once its reads are done (barrier_arrive) and
// waits for the others (barrier_wait) only before it exits, with its writes in between; no thread leaves
// early (the barrier counts them all).
// What it costs: a chunk must fit in registers (at most 2^18 bf16 per row: problem.hpp), the scheduler
// must place 8 blocks together in one GPC (max_active_clusters, a fact, says how many fit at once), and
// two cluster barriers per block.
// Napkin math: the same parallelism as step 02 with a third less DRAM traffic once the batch outgrows the
// L2 (~1.5x at 512 rows of 128K), and no second launch at any size.
// Run: aisp bench run --targets ch10:cluster_softmax:03_cluster_dsmem
#include <cooperative_groups.h>

#include "chapters/ch10_tensor_cores/cluster_softmax/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::cluster_softmax::v03 {

namespace cg = cooperative_groups;

constexpr int k_threads = k_chunk_threads;
constexpr int k_warps = k_threads / 32;
constexpr unsigned k_full_mask = 0xffffffffu;
static_assert(k_chunks <= 32, "warp 0 reads one chunk's pair per lane");

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// op(v) over the block, in every thread: warps with shuffles, then warp 0 over the warps' results.
template <class WarpOp>
__device__ float block_reduce(float v, float identity, WarpOp op, float* scratch) {
  v = op(v);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    const float w = op(threadIdx.x < k_warps ? scratch[threadIdx.x] : identity);
    if (threadIdx.x == 0) scratch[k_warps] = w;
  }
  __syncthreads();
  const float result = scratch[k_warps];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// k_vecs vectors per thread: vector first + threadIdx.x + k * k_threads of the row, below the chunk's end.
// The array stays in registers: every index into it is a compile-time constant after unrolling.
template <int k_vecs>
__global__ void __launch_bounds__(k_threads) cluster_softmax_kernel(const __nv_bfloat16* __restrict__ x,
                                                                    __nv_bfloat16* __restrict__ y, int cols) {
  __shared__ float scratch[k_warps + 1];
  __shared__ online::MaxSum chunk_pair;  // read by the cluster's 8 blocks through distributed shared memory
  __shared__ online::MaxSum row_pair;
  cg::cluster_group cluster = cg::this_cluster();

  const std::size_t base = static_cast<std::size_t>(blockIdx.y) * cols;
  const auto* in = reinterpret_cast<const uint4*>(x + base);
  auto* out = reinterpret_cast<uint4*>(y + base);
  // Chunk cluster.block_rank() (== blockIdx.x: the cluster spans gridDim.x) of the row: reference.hpp's
  // chunk_range.
  const int vectors = cols / 8, per = (vectors + k_chunks - 1) / k_chunks;
  const int first = min(static_cast<int>(cluster.block_rank()) * per, vectors);
  const int end = min(first + per, vectors);

  Vec8 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {  // every load issued before the first use
    const int i = first + threadIdx.x + k * k_threads;
    if (i < end) v[k].raw = in[i];
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (first + threadIdx.x + k * k_threads < end) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        m = fmaxf(m, fmaxf(f.x, f.y));
      }
    }
  }
  m = block_reduce(m, -INFINITY, warp_max, scratch);
  float s = 0.0f;
  if (m != -INFINITY) {  // an empty chunk (a short row's last ones) sums nothing
#pragma unroll
    for (int k = 0; k < k_vecs; ++k) {
      if (first + threadIdx.x + k * k_threads < end) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 f = __bfloat1622float2(v[k].pair[p]);
          s += fast_exp(f.x - m) + fast_exp(f.y - m);
        }
      }
    }
  }
  s = block_reduce(s, 0.0f, warp_sum, scratch);
  if (threadIdx.x == 0) chunk_pair = {m, s};

  // Release/acquire across the cluster: every block's chunk_pair is written and visible (and every
  // block of the cluster is running) once all threads of all 8 blocks have arrived.
  cluster.sync();
  if (threadIdx.x < 32) {
    const online::MaxSum p = threadIdx.x < k_chunks ? *cluster.map_shared_rank(&chunk_pair, threadIdx.x)
                                                    : online::MaxSum{-INFINITY, 0.0f};
    const online::MaxSum merged = online::warp_merge(p);
    if (threadIdx.x == 0) row_pair = merged;
  }
  // This block has read the others' shared memory: it may now be freed by them; this block's own must
  // live until every block has read it (barrier_wait below, before exit).
  auto token = cluster.barrier_arrive();
  __syncthreads();
  const online::MaxSum row = row_pair;
  const float inv_sum = 1.0f / row.s;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = first + threadIdx.x + k * k_threads;
    if (i < end) {
      Vec8 o;
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        o.pair[p] = __floats2bfloat162_rn(fast_exp(f.x - row.m) * inv_sum, fast_exp(f.y - row.m) * inv_sum);
      }
      out[i] = o.raw;
    }
  }
  cluster.barrier_wait(std::move(token));
}

template <int k_vecs>
cudaLaunchConfig_t cluster_config(const Args& a, cudaStream_t stream, cudaLaunchAttribute& attr) {
  attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = k_chunks;  // one cluster per row
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(k_chunks, static_cast<unsigned>(a.rows));
  config.blockDim = dim3(k_threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return config;
}

template <int k_vecs>
void launch_vecs(const Args& a, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = cluster_config<k_vecs>(a, stream, attr);
  AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_softmax_kernel<k_vecs>, a.x, a.y, a.cols));
}

void launch(const Args& a, cudaStream_t stream) {
  switch (vectors_per_thread(a.cols)) {  // problem.hpp admits only rows that one of these holds
    case 1: launch_vecs<1>(a, stream); break;
    case 2: launch_vecs<2>(a, stream); break;
    case 4: launch_vecs<4>(a, stream); break;
    default: launch_vecs<8>(a, stream); break;
  }
  AISP_CHECK_LAUNCH();
}

// Registers, spills, and how many clusters the GPU holds at once (a cluster's 8 blocks must fit in one
// GPC together): what decides the bytes in flight.
template <int k_vecs>
std::vector<Fact> facts_vecs(const Args& a) {
  const auto kernel = cluster_softmax_kernel<k_vecs>;
  std::vector<Fact> f = standard_facts(kernel_facts(reinterpret_cast<const void*>(kernel), k_threads));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = cluster_config<k_vecs>(a, nullptr, attr);
  int clusters = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  f.push_back({"max_active_clusters", std::to_string(clusters)});
  f.push_back({"vectors_per_thread", std::to_string(k_vecs)});
  return f;
}

std::vector<Fact> facts(const Args& a) {
  switch (vectors_per_thread(a.cols)) {
    case 1: return facts_vecs<1>(a);
    case 2: return facts_vecs<2>(a);
    case 4: return facts_vecs<4>(a);
    default: return facts_vecs<8>(a);
  }
}

AISP_REGISTER_VARIANT_WITH_FACTS(ClusterSoftmaxProblem, launch, facts, .step = 3, .slug = "cluster_dsmem",
                                 .kind = VariantKind::optimized,
                                 .summary = "a row's 8 blocks as one cluster: chunks in registers, (max, sum) "
                                            "through DSMEM, one read of the row",
                                 .min_cc = 90);

}  // namespace aisp::ch10::cluster_softmax::v03
