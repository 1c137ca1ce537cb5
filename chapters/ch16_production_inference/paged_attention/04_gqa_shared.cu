// ch16:paged_attention:04_gqa_shared — one pass over a KV head serves all the query heads that share it.
//
// What changed: a block belongs to a (sequence, KV head, split) instead of a (sequence, query head,
// split). Each lane keeps the q vectors of the whole group (heads / kv_heads query heads, 4 at the
// defaults) and, for every K row it loads, computes all the group's dot products; each V row it loads
// goes into all the group's accumulators. The warps keep one online softmax per query head. Everything
// else is step 03: 16-byte loads, warps over pages, splits from the device, the same merge kernel.
// A page is taken in tiles of at most 32 / group_slots loads per lane, so that scores, queries and
// accumulators (group_slots x 8 floats each) stay in registers at a group of 8. The group size is a
// compile-time slot count (1, 2, 4 or 8, the next power of two); unused slots hold q = 0 and are
// computed but never written, so a group of 3 costs what a group of 4 does.
// Why it helps: steps 01-03 read every K/V byte once per query head: 4 reads per byte at the defaults.
// When the group's blocks run together those repeats come from L2, so DRAM still moves ~2.15 GB, but L2
// must deliver 8.6 GB to the SMs, and that (not DRAM) is what limits steps 02 and 03. Here each byte
// leaves L2 once: the L2 traffic equals the DRAM traffic. What is left is keeping bytes in flight with
// fewer warps: at 168 registers, 3 blocks (12 warps) per SM, each lane with 8 x 16 B of K or V
// outstanding: ~48 KB per SM, above the ~27 KB that ~4.4 TB/s x ~0.8 us of latency asks of each of 132
// SMs. It also does the work in a quarter of the blocks (batch x kv_heads x splits), which is why it is
// built on the split step: 64 x 8 = 512 blocks are 1.3 waves of 396; the plan picks 3 splits, 3.9 waves.
// Napkin math: 2.15 GB at ~4.4 TB/s: ~0.49 ms, the ladder's bound; expect >= 85-90% of the DRAM read
// ceiling. The FP32 work is the same as before (2 FMAs per token x dim x query head), but an SM now does
// 2 FMAs per byte of K/V it loads instead of 0.5: still well under the FP32 rate (~14 flops per byte).
// Run: aisp bench run --targets ch16:paged_attention:04_gqa_shared
#include "chapters/ch16_production_inference/paged_attention/problem.hpp"
#include "chapters/ch16_production_inference/paged_attention/split_merge.cuh"
#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch16::paged_attention::v04 {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr unsigned k_full_mask = 0xffffffffu;

// How a warp covers a page of head dim D and page size P, for GS query-head slots (the group size
// rounded up to a power of two): tiles of `loads` 16-byte loads per lane.
template <int D, int P, int GS>
struct PageGeometry {
  static constexpr int vecs_per_row = D / 8;                // lanes per row: 16 at D = 128, 8 at 64
  static constexpr int rows_per_load = 32 / vecs_per_row;  // rows per warp-wide load: 2 or 4
  static constexpr int loads = P / rows_per_load < 32 / GS ? P / rows_per_load : 32 / GS;
  static constexpr int rows_per_tile = rows_per_load * loads;
  static_assert(P % rows_per_tile == 0, "a page must be whole tiles");
};

// The running softmax of one warp, per query head of the group: m and l warp-uniform; acc holds 8
// output values per lane, dims 8 * col .. 8 * col + 7, summed over the rows that lane reads.
template <int GS>
struct WarpState {
  float m[GS];
  float l[GS] = {};
  float acc[GS][8] = {};
  __device__ WarpState() {
#pragma unroll
    for (int g = 0; g < GS; ++g) m[g] = -INFINITY;
  }
};

union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__device__ void to_float8(uint4 raw, float (&f)[8]) {
  Vec8 v{raw};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(v.pair[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

template <int from, int to>
__device__ float xor_sum(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}
template <int from, int to>
__device__ float xor_max(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

// One tile of rows (tile rows from `rows`, `valid` of them holding tokens, >= 1) into the warp's running
// softmaxes, every K and V vector loaded once for all GS query heads.
template <int D, int P, int GS>
__device__ void attend_tile(const uint4* k, const uint4* v, int valid, const float (&q)[GS][8], int row0,
                            int col, WarpState<GS>& st) {
  using G = PageGeometry<D, P, GS>;
  uint4 raw[G::loads];
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    const int r = row0 + G::rows_per_load * i;
    raw[i] = r < valid ? k[r * G::vecs_per_row + col] : make_uint4(0, 0, 0, 0);
  }
  float s[G::loads][GS];
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    float kf[8];
    to_float8(raw[i], kf);
#pragma unroll
    for (int g = 0; g < GS; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) dot = fmaf(q[g][j], kf[j], dot);
      const float sum = xor_sum<1, G::vecs_per_row>(dot);  // every lane shuffles, valid row or not
      s[i][g] = row0 + G::rows_per_load * i < valid ? sum : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < GS; ++g) {
    float m_tile = -INFINITY;
#pragma unroll
    for (int i = 0; i < G::loads; ++i) m_tile = fmaxf(m_tile, s[i][g]);
    const float m_new = fmaxf(st.m[g], xor_max<G::vecs_per_row, 32>(m_tile));  // finite: row 0 is valid
    const float alpha = exp2f(st.m[g] - m_new);
    float l_tile = 0.0f;
#pragma unroll
    for (int i = 0; i < G::loads; ++i) l_tile += (s[i][g] = exp2f(s[i][g] - m_new));
    st.l[g] = st.l[g] * alpha + xor_sum<G::vecs_per_row, 32>(l_tile);
    st.m[g] = m_new;
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[g][j] *= alpha;
  }
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    const int r = row0 + G::rows_per_load * i;
    raw[i] = r < valid ? v[r * G::vecs_per_row + col] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    float vf[8];
    to_float8(raw[i], vf);
#pragma unroll
    for (int g = 0; g < GS; ++g) {
#pragma unroll
      for (int j = 0; j < 8; ++j) st.acc[g][j] = fmaf(s[i][g], vf[j], st.acc[g][j]);
    }
  }
}

// (k_threads, 1): at least one block per SM, which is no limit at all; without it ptxas capped a group of
// two at 96 registers and spilled one. The group's arrays need 100-250 registers: few warps per SM, each
// with 16 bytes x `loads` of K or V in flight per lane.
template <int D, int P, int GS>
__global__ void __launch_bounds__(k_threads, 1)
    gqa_split_kernel(const Args a, int pages_per_split, Partials part) {
  using G = PageGeometry<D, P, GS>;
  __shared__ float m_s[k_warps][GS], l_s[k_warps][GS];
  __shared__ float acc_s[k_warps][GS][D];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % G::vecs_per_row, row0 = lane / G::vecs_per_row;
  const int b = blockIdx.x / a.kv_heads, kvh = blockIdx.x % a.kv_heads;
  const int group = a.heads / a.kv_heads;
  const int head0 = b * a.heads + kvh * group;  // [b][kvh * group + g] in q, out and the partials

  float q[GS][8];
  const float scale = a.scale * k_log2e;
#pragma unroll
  for (int g = 0; g < GS; ++g) {
    const auto* qg = reinterpret_cast<const uint4*>(a.q + static_cast<std::int64_t>(head0 + g) * D);
    const uint4 raw = g < group ? qg[col] : make_uint4(0, 0, 0, 0);  // unused slots: q = 0
    to_float8(raw, q[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] *= scale;
  }

  WarpState<GS> st;
  const std::int32_t* pages = a.page_table + static_cast<std::int64_t>(b) * a.pages_per_seq;
  const int first = blockIdx.y * pages_per_split;  // < pages_per_seq: every split has a page
  const int last = min(first + pages_per_split, a.pages_per_seq);
  for (int pg = first + warp; pg < last; pg += k_warps) {
    const std::int64_t block = (static_cast<std::int64_t>(pages[pg]) * a.kv_heads + kvh) * P * D;
    const int valid = min(P, a.context - pg * P);
    for (int r = 0; r < valid; r += G::rows_per_tile) {
      const auto* k = reinterpret_cast<const uint4*>(a.k_pool + block + static_cast<std::int64_t>(r) * D);
      const auto* v = reinterpret_cast<const uint4*>(a.v_pool + block + static_cast<std::int64_t>(r) * D);
      attend_tile<D, P, GS>(k, v, valid - r, q, row0, col, st);
    }
  }
#pragma unroll
  for (int g = 0; g < GS; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[g][j] = xor_sum<G::vecs_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc_s[warp][g][8 * col + j] = st.acc[g][j];
    }
    if (lane == 0) {
      m_s[warp][g] = st.m[g];  // -inf for a warp that had no page: it weighs exp2(-inf) = 0 below
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
    const std::int64_t at = static_cast<std::int64_t>(head0 + g) * gridDim.y + blockIdx.y;
    part.acc[at * D + d] = o;
    if (d == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

// Calls f.template operator()<D, P, GS>() with GS the group size rounded up to a power of two.
template <class F>
void with_group(const Args& a, F&& f) {
  const int group = a.heads / a.kv_heads;
  with_shape(a, [&]<int D, int P>() {
    if (group == 1) {
      f.template operator()<D, P, 1>();
    } else if (group == 2) {
      f.template operator()<D, P, 2>();
    } else if (group <= 4) {
      f.template operator()<D, P, 4>();
    } else {
      f.template operator()<D, P, 8>();
    }
  });
}

class GqaShared {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_group(a, [&]<int D, int P, int GS>() {
      AISP_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gqa_split_kernel<D, P, GS>, k_threads, 0));
    });
    m_plan = plan_splits(a.batch * a.kv_heads, a.pages_per_seq, a.sm_count * per_sm, k_warps);
    const std::size_t n = static_cast<std::size_t>(a.batch) * a.heads * m_plan.splits;
    m_m = DeviceBuffer<float>(n);
    m_l = DeviceBuffer<float>(n);
    m_acc = DeviceBuffer<float>(n * a.head_dim);
  }

  void launch(const Args& a, cudaStream_t stream) {
    const Partials part{m_m.data(), m_l.data(), m_acc.data()};
    with_group(a, [&]<int D, int P, int GS>() {
      gqa_split_kernel<D, P, GS><<<dim3(a.batch * a.kv_heads, m_plan.splits), k_threads, 0, stream>>>(
          a, m_plan.pages_per_split, part);
      AISP_CHECK_LAUNCH();
      merge_splits_kernel<D><<<a.batch * a.heads, D, 0, stream>>>(a, part, m_plan.splits);
      AISP_CHECK_LAUNCH();
    });
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_group(a, [&]<int D, int P, int GS>() {
      const auto* kernel = reinterpret_cast<const void*>(gqa_split_kernel<D, P, GS>);
      out = standard_facts(kernel_facts(kernel, k_threads));
    });
    out.push_back({"splits", std::to_string(m_plan.splits)});
    out.push_back({"pages_per_split", std::to_string(m_plan.pages_per_split)});
    return out;
  }

 private:
  SplitPlan m_plan;
  DeviceBuffer<float> m_m, m_l, m_acc;
};

AISP_REGISTER_STATEFUL_VARIANT(PagedAttentionProblem, GqaShared, .step = 4, .slug = "gqa_shared",
                               .kind = VariantKind::step,
                               .summary = "block per (sequence, KV head, split): each K/V vector loaded once "
                                          "for the whole query-head group");

}  // namespace aisp::ch16::paged_attention::v04
