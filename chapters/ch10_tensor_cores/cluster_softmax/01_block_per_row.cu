// ch10:cluster_softmax:01_block_per_row — one 1024-thread block per row: an online pass for the max and
// the sum, a second pass that writes (baseline).
//
// What it does: ch08:softmax's online softmax (03_online) with its 16-byte vectors (04_vectorized), sized
// for long rows: each thread walks the row's vectors threadIdx.x, + 1024, ..., four loads in flight at
// a time, keeping a running max m and a running sum s of exp(x - m) (rescaled by exp(m_old - m_new) when
// the max grows); the block merges its 1024 (m, s) pairs, and a second walk over the row writes
// exp(x - M) / S.
// Why it is the baseline: it is how the row softmax that serves 8K rows (ch08) is first written for a
// vocabulary, and it reads the row from DRAM once when the rows in flight fit in the L2 (the second walk
// then reads it from there).
// What it costs here: one block per row. A batch of 32 rows runs on 32 SMs of 132, and one SM's loads in
// flight (1024 threads x 4 x 16 bytes = 64 KB) cannot pull a GPU's worth of bandwidth.
// Napkin math (32 x 128256, 16.4 MB moved): at ~64 KB per ~1 us round trip, ~60 GB/s per SM, ~2 TB/s on
// 32 SMs for the first walk; the second walk reads the L2. Expect well under the DRAM copy ceiling
// below ~100 rows, and near it from a few hundred rows on (every SM busy).
// Run: aisp bench run --targets ch10:cluster_softmax:01_block_per_row
#include "chapters/ch10_tensor_cores/cluster_softmax/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch10::cluster_softmax::v01 {

constexpr int k_threads = k_row_threads;
constexpr int k_unroll = 4;  // vectors in flight per thread

__global__ void __launch_bounds__(k_threads) softmax_row_kernel(const __nv_bfloat16* __restrict__ x,
                                                                __nv_bfloat16* __restrict__ y, int cols) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const auto* in = reinterpret_cast<const uint4*>(x + base);  // rows start on 16-byte boundaries
  auto* out = reinterpret_cast<uint4*>(y + base);
  const int vectors = cols / 8;

  online::MaxSum acc{-INFINITY, 0.0f};
  for (int i0 = threadIdx.x; i0 < vectors; i0 += k_unroll * k_threads) {
    Vec8 v[k_unroll];
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {  // every load issued before the first exp
      const int i = i0 + u * k_threads;
      if (i < vectors) v[u].raw = in[i];
    }
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      if (i0 + u * k_threads < vectors) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 f = __bfloat1622float2(v[u].pair[p]);
          online::update(acc, f.x);
          online::update(acc, f.y);
        }
      }
    }
  }
  const online::MaxSum row = online::block_merge<k_threads>(acc);
  const float inv_sum = 1.0f / row.s;
  for (int i = threadIdx.x; i < vectors; i += k_threads) {
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
  softmax_row_kernel<<<a.rows, k_threads, 0, stream>>>(a.x, a.y, a.cols);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(ClusterSoftmaxProblem, launch, .step = 1, .slug = "block_per_row",
                      .kind = VariantKind::baseline,
                      .summary = "one 1024-thread block per row: online max/sum pass, then a writing pass");

}  // namespace aisp::ch10::cluster_softmax::v01
