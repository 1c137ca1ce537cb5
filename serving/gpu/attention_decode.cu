// Decode attention (one query token per sequence) over the paged cache: the design of
// ch16:paged_attention:05_pipelined, extended to a ragged batch (every sequence its own context length)
// and to the engine's buffers (q read from the fused QKV rows, the block table with its own stride).
//
// Per block: one (sequence, KV head) and one split of its pages. Its 4 warps take pages round-robin; a
// warp copies each tile of K and V (16-byte cp.async.cg, rows past the context zero-filled and never
// read from memory) into its own half of a two-stage shared-memory buffer while it computes the
// previous tile, and keeps the softmax of every query head of the KV head's group at once (GQA: K and V
// are read once for the whole group). The warps' partial softmax states are merged in shared memory.
// Split-KV: when sequences x KV heads alone would not fill the GPU (batch 1 is 8 blocks on an H100 of
// 132 SMs), each sequence's pages are cut into splits (ch16's plan_splits rule: the fewest splits whose
// waves are >= 90% full), each split writes an unnormalized partial (max, sum, accumulator), and a merge
// kernel combines them. With one split the block writes the output directly.
// Bound: reading K and V once. Llama-3.2-1B at 4096 tokens of context: 16 layers x 2 x 8 heads x 4096 x
// 64 x 2 B = 134 MB per sequence per step, ~40 us at ~3.3 TB/s (H100 SXM), against ~2.5 GB of weights.
// PTX ISA: "cp.async" (src-size 0 zero-fills), "cp.async.commit_group", "cp.async.wait_group".
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "chapters/ch16_production_inference/paged_attention/pipelined_tile.cuh"
#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/attention.hpp"
#include "serving/gpu/current_device.hpp"

namespace aisp::serving::gpu {
namespace {

// The tile machinery is ch16:paged_attention step 05's own (pipelined_tile.cuh): PageGeometry, WarpState,
// attend_tile, the cp.async helpers and the block shape (k_warps, k_threads, k_stages).
using namespace ::aisp::ch16::paged_attention::pipelined;
constexpr float k_log2e = 1.4426950408889634f;

// Partials: [num_decode * heads][splits] for m and l, x D for acc; (pair, split) at pair * splits + split.
struct Partials {
  float* m;
  float* l;
  float* acc;
};

template <int D, int P, int GS>
__global__ void __launch_bounds__(k_threads, 1)
    decode_split_kernel(const AttentionArgs a, int pages_per_split, Partials part) {
  using G = PageGeometry<D, P, GS>;
  extern __shared__ uint4 smem[];  // [k_warps][k_stages][K, V][32 * loads]; then acc_s
  __shared__ float m_s[k_warps][GS], l_s[k_warps][GS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % G::vecs_per_row, row0 = lane / G::vecs_per_row;
  const int b = blockIdx.x / a.kv_heads, kvh = blockIdx.x % a.kv_heads;
  const int seq = a.decode_seqs[b];
  const int token = a.query_start[seq];
  const int context = a.context_len[seq];
  const int seq_pages = (context + P - 1) / P;
  const int first = blockIdx.y * pages_per_split;
  if (first >= seq_pages) return;  // block-uniform, before any barrier: this sequence has fewer splits
  const int last = min(first + pages_per_split, seq_pages);
  const int group = a.heads / a.kv_heads;
  const int head0 = kvh * group;

  float q[GS][8];
  const float scale = a.scale * k_log2e;
#pragma unroll
  for (int g = 0; g < GS; ++g) {
    const auto* qg = reinterpret_cast<const uint4*>(a.qkv + static_cast<std::int64_t>(token) * a.qkv_stride +
                                                    static_cast<std::int64_t>(head0 + g) * D);
    const uint4 raw = g < group ? qg[col] : make_uint4(0, 0, 0, 0);
    to_float8(raw, q[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] *= scale;
  }

  WarpState<GS> st;
  const std::int32_t* pages = a.block_table + static_cast<std::int64_t>(seq) * a.table_stride;
  const int mine0 = first + warp;
  const int n_pages = mine0 < last ? (last - mine0 + k_warps - 1) / k_warps : 0;
  const int units = n_pages * G::tiles_per_page;
  uint4* stages = smem + warp * k_stages * G::stage_vecs;
  int phys = n_pages > 0 ? pages[mine0] : 0;
  int phys_ahead = n_pages > 1 ? pages[mine0 + k_warps] : 0;

  const auto tile_valid = [&](int u) {
    const int pg = mine0 + k_warps * (u / G::tiles_per_page);
    return min(P, context - pg * P) - (u % G::tiles_per_page) * G::rows_per_tile;
  };
  const auto issue = [&](int u) {
    if (u < units) {
      const int j = u / G::tiles_per_page, t = u % G::tiles_per_page;
      if (t == 0 && j > 0) {
        phys = phys_ahead;
        phys_ahead = j + 1 < n_pages ? pages[mine0 + k_warps * (j + 1)] : 0;
      }
      const int valid = tile_valid(u);
      const std::int64_t at = (static_cast<std::int64_t>(phys) * a.kv_heads + kvh) * P * D +
                              static_cast<std::int64_t>(t) * G::rows_per_tile * D;
      const auto* k = reinterpret_cast<const uint4*>(a.k_cache + at);
      const auto* v = reinterpret_cast<const uint4*>(a.v_cache + at);
      uint4* dst = stages + (u % k_stages) * G::stage_vecs;
#pragma unroll
      for (int i = 0; i < G::loads; ++i) {
        const bool in = row0 + G::rows_per_load * i < valid;  // slots past the context are never read
        cp_async16(dst + 32 * i + lane, k + 32 * i + lane, in);
        cp_async16(dst + 32 * (G::loads + i) + lane, v + 32 * i + lane, in);
      }
    }
    cp_async_commit();  // an empty group past the end keeps wait_group 1 meaning "all but the newest"
  };

  issue(0);
  for (int u = 0; u < units; ++u) {
    issue(u + 1);
    cp_async_wait<1>();
    const int valid = tile_valid(u);
    if (valid > 0) {
      const uint4* ks = stages + (u % k_stages) * G::stage_vecs;
      attend_tile<D, P, GS>(ks, ks + 32 * G::loads, valid, q, row0, lane, st);
    }
    __syncwarp();  // stage u % 2 is read before issue(u + 2) overwrites it
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages become acc_s

  auto* acc_s = reinterpret_cast<float(*)[GS][D]>(smem);
#pragma unroll
  for (int g = 0; g < GS; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[g][j] = xor_sum<G::vecs_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc_s[warp][g][8 * col + j] = st.acc[g][j];
    }
    if (lane == 0) {
      m_s[warp][g] = st.m[g];  // -inf for a warp without a page: weighs exp2(-inf) = 0 below
      l_s[warp][g] = st.l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += k_threads) {
    const int g = i / D, d = i % D;
    float m = m_s[0][g];
    for (int w = 1; w < k_warps; ++w) m = fmaxf(m, m_s[w][g]);
    float l = 0.0f, o = 0.0f;
    for (int w = 0; w < k_warps; ++w) {
      const float f = exp2f(m_s[w][g] - m);
      l += l_s[w][g] * f;
      o += acc_s[w][g][d] * f;
    }
    if (gridDim.y == 1) {
      a.out[static_cast<std::int64_t>(token) * a.heads * D + static_cast<std::int64_t>(head0 + g) * D + d] =
          __float2bfloat16(o / l);
    } else {
      const std::int64_t at = (static_cast<std::int64_t>(b) * a.heads + head0 + g) * gridDim.y + blockIdx.y;
      part.acc[at * D + d] = o;
      if (d == 0) {
        part.m[at] = m;
        part.l[at] = l;
      }
    }
  }
}

// One block per (decode sequence, query head), one thread per output value: the sequence's splits
// (those that held pages; a short sequence in a batch of long ones has fewer) rescaled to their common
// max and added.
template <int D, int P>
__global__ void __launch_bounds__(D) merge_splits_kernel(const AttentionArgs a, const Partials part, int splits,
                                                         int pages_per_split) {
  const int b = blockIdx.x / a.heads, head = blockIdx.x % a.heads;
  const int seq = a.decode_seqs[b];
  const int seq_pages = (a.context_len[seq] + P - 1) / P;
  const int used = min(splits, (seq_pages + pages_per_split - 1) / pages_per_split);
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * splits;
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, part.m[base + s]);
  float l = 0.0f, o = 0.0f;
  for (int s = 0; s < used; ++s) {
    const float f = exp2f(part.m[base + s] - m);
    l += part.l[base + s] * f;
    o += part.acc[(base + s) * D + threadIdx.x] * f;
  }
  const int token = a.query_start[seq];
  a.out[static_cast<std::int64_t>(token) * a.heads * D + static_cast<std::int64_t>(head) * D + threadIdx.x] =
      __float2bfloat16(o / l);
}

// Calls f.template operator()<D, P, GS>() with the run's head_dim, page size and group size (rounded up to
// a power of two) as compile-time constants; attention_supports() admitted exactly these.
template <class F>
void with_shape(const AttentionArgs& a, F&& f) {
  const int group = a.heads / a.kv_heads;
  const auto with_group = [&]<int D, int P>() {
    if (group == 1) {
      f.template operator()<D, P, 1>();
    } else if (group == 2) {
      f.template operator()<D, P, 2>();
    } else if (group <= 4) {
      f.template operator()<D, P, 4>();
    } else {
      f.template operator()<D, P, 8>();
    }
  };
  const auto with_page = [&]<int D>() {
    if (a.block_size == 8) {
      with_group.template operator()<D, 8>();
    } else if (a.block_size == 16) {
      with_group.template operator()<D, 16>();
    } else {
      with_group.template operator()<D, 32>();
    }
  };
  if (a.head_dim == 64) {
    with_page.template operator()<64>();
  } else {
    with_page.template operator()<128>();
  }
}

// Blocks of the split kernel resident per SM, from the occupancy calculator, once per instantiation and
// device (the dynamic shared memory above 48 KiB needs the opt-in first, on each device).
template <int D, int P, int GS>
int blocks_per_sm() {
  static PerDevice<int> per_sm;
  return per_sm.get([] {
    const auto kernel = decode_split_kernel<D, P, GS>;
    const int smem = static_cast<int>(smem_bytes<D, P, GS>());
    AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int n = 0;
    AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, k_threads, smem));
    return std::max(n, 1);
  });
}

}  // namespace

DecodePlan plan_decode(const AttentionArgs& a, int max_context, int sm_count) {
  if (a.num_decode == 0) return {};
  int per_sm = 1;
  with_shape(a, [&]<int D, int P, int GS>() { per_sm = blocks_per_sm<D, P, GS>(); });
  const int pages = std::max(1, (max_context + a.block_size - 1) / a.block_size);
  const auto plan = ch16::paged_attention::plan_splits(a.num_decode * a.kv_heads, pages, sm_count * per_sm, k_warps);
  return {plan.splits, plan.pages_per_split};
}

std::int64_t decode_scratch_floats(const AttentionArgs& a, const DecodePlan& plan) {
  if (plan.splits <= 1) return 0;
  const std::int64_t pairs = static_cast<std::int64_t>(a.num_decode) * a.heads * plan.splits;
  return pairs * (2 + a.head_dim);
}

void launch_attention_decode(const AttentionArgs& a, const DecodePlan& plan, float* scratch,
                             cudaStream_t stream) {
  if (a.num_decode == 0) return;
  const std::int64_t pairs = static_cast<std::int64_t>(a.num_decode) * a.heads * plan.splits;
  const Partials part{scratch, scratch ? scratch + pairs : nullptr, scratch ? scratch + 2 * pairs : nullptr};
  with_shape(a, [&]<int D, int P, int GS>() {
    (void)blocks_per_sm<D, P, GS>();  // the shared-memory opt-in, once
    const dim3 grid(static_cast<unsigned>(a.num_decode * a.kv_heads), static_cast<unsigned>(plan.splits));
    decode_split_kernel<D, P, GS><<<grid, k_threads, smem_bytes<D, P, GS>(), stream>>>(a, plan.pages_per_split,
                                                                                         part);
    AISP_CHECK_LAUNCH();
    if (plan.splits > 1) {
      merge_splits_kernel<D, P><<<static_cast<unsigned>(a.num_decode * a.heads), D, 0, stream>>>(
          a, part, plan.splits, plan.pages_per_split);
      AISP_CHECK_LAUNCH();
    }
  });
}

}  // namespace aisp::serving::gpu
