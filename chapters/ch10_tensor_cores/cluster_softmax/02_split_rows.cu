// ch10:cluster_softmax:02_split_rows — every row split over 8 blocks; the blocks' partial (max, sum)
// meet in global memory, and a second kernel reads the row again to write it (step).
//
// What changed: the parallelism. Each row is cut into 8 chunks (chunk_range), one 512-thread block each:
// 32 rows are 256 blocks, every SM busy. A block cannot write its chunk before the row's max and sum
// are known, and those need every chunk, so the work becomes two kernels: the first reduces each chunk
// to its (max, sum of exp(x - max)) pair (step 01's online walk and block merge) and stores it; the
// second (the kernel boundary is the grid-wide barrier) merges its row's 8 pairs, M = max m_b, S = sum
// s_b exp(m_b - M) (reference.hpp's combine), then reads its chunk again and writes exp(x - M) / S.
// Why it helps: where step 01 left SMs idle (fewer rows than SMs), all of them now read.
// What it costs: the second read of every chunk (from the L2 while the batch fits there, 32 x 256 KB
// does; from DRAM once rows x cols x 2 bytes passes the L2's 50 MB: ~200 rows of 128K), a second launch,
// and the drain between the kernels.
// Napkin math (32 x 128256): 8.2 MB read at near the DRAM rate (~3 us on an H200), 8.2 MB read from
// the L2 and 8.2 MB written (~3 us), plus a launch; at 512 rows the second read adds a third to the
// DRAM traffic (1.5x of the minimum).
// Run: aisp bench run --targets ch10:cluster_softmax:02_split_rows
#include "chapters/ch10_tensor_cores/cluster_softmax/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch10::cluster_softmax::v02 {

constexpr int k_threads = k_chunk_threads;
constexpr int k_unroll = 4;  // vectors in flight per thread

// Chunk blockIdx.x of row blockIdx.y: vectors [first, end) of the row (reference.hpp's chunk_range).
struct Chunk {
  int first;
  int end;
};
__device__ Chunk this_chunk(int cols) {
  const int vectors = cols / 8, per = (vectors + k_chunks - 1) / k_chunks;
  const int first = min(static_cast<int>(blockIdx.x) * per, vectors);
  return {first, min(first + per, vectors)};
}

__global__ void __launch_bounds__(k_threads) chunk_partial_kernel(const __nv_bfloat16* __restrict__ x,
                                                                  float2* __restrict__ partials, int cols) {
  const auto* in = reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(blockIdx.y) * cols);
  const Chunk c = this_chunk(cols);
  online::MaxSum acc{-INFINITY, 0.0f};
  for (int i0 = c.first + threadIdx.x; i0 < c.end; i0 += k_unroll * k_threads) {
    Vec8 v[k_unroll];
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {  // every load issued before the first exp
      const int i = i0 + u * k_threads;
      if (i < c.end) v[u].raw = in[i];
    }
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      if (i0 + u * k_threads < c.end) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 f = __bfloat1622float2(v[u].pair[p]);
          online::update(acc, f.x);
          online::update(acc, f.y);
        }
      }
    }
  }
  const online::MaxSum chunk = online::block_merge<k_threads>(acc);  // {-inf, 0} for an empty chunk
  if (threadIdx.x == 0) partials[blockIdx.y * k_chunks + blockIdx.x] = make_float2(chunk.m, chunk.s);
}

__global__ void __launch_bounds__(k_threads) normalize_kernel(const __nv_bfloat16* __restrict__ x,
                                                              const float2* __restrict__ partials,
                                                              __nv_bfloat16* __restrict__ y, int cols) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.y) * cols;
  const auto* in = reinterpret_cast<const uint4*>(x + base);
  auto* out = reinterpret_cast<uint4*>(y + base);
  // Every thread merges the row's 8 pairs itself: 64 bytes, the same for the whole block (broadcast).
  online::MaxSum row{-INFINITY, 0.0f};
#pragma unroll
  for (int b = 0; b < k_chunks; ++b) {
    const float2 p = partials[blockIdx.y * k_chunks + b];
    row = online::merge(row, {p.x, p.y});
  }
  const float inv_sum = 1.0f / row.s;
  const Chunk c = this_chunk(cols);
  for (int i = c.first + threadIdx.x; i < c.end; i += k_threads) {
    Vec8 v, o;
    v.raw = in[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      o.pair[p] = __floats2bfloat162_rn(fast_exp(f.x - row.m) * inv_sum, fast_exp(f.y - row.m) * inv_sum);
    }
    out[i] = o.raw;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const dim3 grid(k_chunks, static_cast<unsigned>(a.rows));
  chunk_partial_kernel<<<grid, k_threads, 0, stream>>>(a.x, a.partials, a.cols);
  AISP_CHECK_LAUNCH();
  normalize_kernel<<<grid, k_threads, 0, stream>>>(a.x, a.partials, a.y, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(ClusterSoftmaxProblem, launch, .step = 2, .slug = "split_rows", .kind = VariantKind::step,
                      .summary = "each row over 8 blocks: partial (max, sum) through global memory, a second "
                                 "kernel rereads the row and writes it");

}  // namespace aisp::ch10::cluster_softmax::v02
