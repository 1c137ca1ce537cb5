// ch16:paged_attention:02_warp_per_page — a warp takes whole pages, 16-byte loads across head_dim.
//
// What changed: the unit of work is a page, not a token. Warp w of the block's four takes pages w, w + 4,
// ... of the sequence. A page's (page, KV head) block is page_size x head_dim contiguous bf16; the warp
// reads it with 16-byte loads, head_dim / 8 lanes per row (16 at head_dim 128) and 32 / (head_dim / 8)
// rows per load (2), so every warp-wide load moves 512 contiguous bytes and a lane issues all of a page's
// loads (8 x 16 B for a 16-token page; pages of 32 go in two tiles of 8) before it needs any of them. The
// lanes of a row reduce their partial dot products with shuffles; the warp keeps its own online softmax
// (max, sum, and an accumulator of 8 values per lane) and updates it once per page; the four warps'
// states merge once at the end, through shared memory, with the usual rescaling. No barrier inside the
// context loop.
// Why it helps: coalesced 16-byte loads (one sector request per 32 useful bytes instead of 32 per 64),
// 128 bytes in flight per lane per page instead of 2, and a page-table lookup per page instead of per
// token. The partial last page is handled by predication: rows past the context are neither loaded nor
// weighted (their slots hold NaN in this ladder's inputs, so a masked multiply would not do).
// Napkin math: K/V still cross L2 four times (one per query head of a group), 8.6 GB at the defaults;
// DRAM moves the 2.15 GB once if the four heads' blocks (adjacent block indices) run together, so the L2
// bandwidth, not DRAM, is the likely limit: ~50-60% of the DRAM read ceiling.
// Run: aisp bench run --targets ch16:paged_attention:02_warp_per_page
#include "chapters/ch16_production_inference/paged_attention/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch16::paged_attention::v02 {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr unsigned k_full_mask = 0xffffffffu;

// How a warp covers one page of head dim D and page size P with 16-byte vectors of 8 bf16: in tiles of
// up to 8 loads per lane (16 rows at D = 128), so that a 32-token page does not run out of registers.
template <int D, int P>
struct PageGeometry {
  static constexpr int vecs_per_row = D / 8;                // lanes per row: 16 at D = 128, 8 at 64
  static constexpr int rows_per_load = 32 / vecs_per_row;  // rows per warp-wide load: 2 or 4
  static constexpr int loads = P / rows_per_load < 8 ? P / rows_per_load : 8;  // per lane per tile
  static constexpr int rows_per_tile = rows_per_load * loads;
  static_assert(P % rows_per_tile == 0, "a page must be whole tiles");
};

// The running softmax of one warp: max and sum are warp-uniform; acc holds 8 output values per lane,
// dims 8 * col .. 8 * col + 7, summed over the rows that lane reads.
struct WarpState {
  float m = -INFINITY;
  float l = 0.0f;
  float acc[8] = {};
};

union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__device__ float dot8(const float (&q)[8], uint4 raw) {
  Vec8 k{raw};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(k.pair[i]);
    s = fmaf(q[2 * i], f.x, fmaf(q[2 * i + 1], f.y, s));
  }
  return s;
}

__device__ void fma8(float (&acc)[8], float p, uint4 raw) {
  Vec8 v{raw};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(v.pair[i]);
    acc[2 * i] = fmaf(p, f.x, acc[2 * i]);
    acc[2 * i + 1] = fmaf(p, f.y, acc[2 * i + 1]);
  }
}

// Sum (max) over the lanes whose index differs only in the bits from..to: <1, vecs_per_row> are the lanes
// of one row, <vecs_per_row, 32> the lanes of one column.
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

// One tile of a page (rows from k and v, `valid` >= 1 of them holding tokens) into the warp's running
// softmax. Lane (row0, col) reads rows row0 + rows_per_load * i, vector col of each.
template <int D, int P>
__device__ void attend_tile(const uint4* k, const uint4* v, int valid, const float (&q)[8], int row0, int col,
                            WarpState& st) {
  using G = PageGeometry<D, P>;
  uint4 raw[G::loads];
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    const int r = row0 + G::rows_per_load * i;
    raw[i] = r < valid ? k[r * G::vecs_per_row + col] : make_uint4(0, 0, 0, 0);
  }
  float s[G::loads];
  float m_tile = -INFINITY;
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    s[i] = xor_sum<1, G::vecs_per_row>(dot8(q, raw[i]));  // every lane shuffles, valid row or not
    if (row0 + G::rows_per_load * i >= valid) s[i] = -INFINITY;
    m_tile = fmaxf(m_tile, s[i]);
  }
  const float m_new = fmaxf(st.m, xor_max<G::vecs_per_row, 32>(m_tile));  // finite: row 0 is valid
  const float alpha = exp2f(st.m - m_new);
  float l_tile = 0.0f;
#pragma unroll
  for (int i = 0; i < G::loads; ++i) l_tile += (s[i] = exp2f(s[i] - m_new));
  st.l = st.l * alpha + xor_sum<G::vecs_per_row, 32>(l_tile);
  st.m = m_new;
#pragma unroll
  for (int j = 0; j < 8; ++j) st.acc[j] *= alpha;
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    const int r = row0 + G::rows_per_load * i;
    raw[i] = r < valid ? v[r * G::vecs_per_row + col] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < G::loads; ++i) fma8(st.acc, s[i], raw[i]);
}

template <int D, int P>
__global__ void __launch_bounds__(k_threads) warp_per_page_kernel(const Args a) {
  using G = PageGeometry<D, P>;
  __shared__ float m_s[k_warps], l_s[k_warps];
  __shared__ float acc_s[k_warps][D];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % G::vecs_per_row, row0 = lane / G::vecs_per_row;
  const int b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int kvh = h / (a.heads / a.kv_heads);
  const std::int64_t qo = static_cast<std::int64_t>(blockIdx.x) * D;  // q and out: [b][h][:] = blockIdx.x

  float q[8];
  {
    Vec8 raw{reinterpret_cast<const uint4*>(a.q + qo)[col]};
    const float scale = a.scale * k_log2e;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(raw.pair[i]);
      q[2 * i] = f.x * scale;
      q[2 * i + 1] = f.y * scale;
    }
  }

  WarpState st;
  const std::int32_t* pages = a.page_table + static_cast<std::int64_t>(b) * a.pages_per_seq;
  for (int pg = warp; pg < a.pages_per_seq; pg += k_warps) {
    const std::int64_t block = (static_cast<std::int64_t>(pages[pg]) * a.kv_heads + kvh) * P * D;
    const int valid = min(P, a.context - pg * P);  // the last page may be partial
    for (int r = 0; r < valid; r += G::rows_per_tile) {
      const auto* k = reinterpret_cast<const uint4*>(a.k_pool + block + static_cast<std::int64_t>(r) * D);
      const auto* v = reinterpret_cast<const uint4*>(a.v_pool + block + static_cast<std::int64_t>(r) * D);
      attend_tile<D, P>(k, v, valid - r, q, row0, col, st);
    }
  }
  // The lanes of one column hold different rows' sums under the same (warp-uniform) max: add them.
#pragma unroll
  for (int j = 0; j < 8; ++j) st.acc[j] = xor_sum<G::vecs_per_row, 32>(st.acc[j]);
  if (row0 == 0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc_s[warp][8 * col + j] = st.acc[j];
  }
  if (lane == 0) {
    m_s[warp] = st.m;  // -inf for a warp that had no page: it then weighs exp2(-inf) = 0 below
    l_s[warp] = st.l;
  }
  __syncthreads();
  if (threadIdx.x < D) {
    float m = m_s[0];
    for (int w = 1; w < k_warps; ++w) m = fmaxf(m, m_s[w]);
    float l = 0.0f, o = 0.0f;
    for (int w = 0; w < k_warps; ++w) {
      const float f = exp2f(m_s[w] - m);
      l += l_s[w] * f;
      o += acc_s[w][threadIdx.x] * f;
    }
    a.out[qo + threadIdx.x] = __float2bfloat16(o / l);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  with_shape(a, [&]<int D, int P>() {
    warp_per_page_kernel<D, P><<<a.batch * a.heads, k_threads, 0, stream>>>(a);
    AISP_CHECK_LAUNCH();
  });
}

std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> out;
  with_shape(a, [&]<int D, int P>() {
    out = standard_facts(kernel_facts(reinterpret_cast<const void*>(warp_per_page_kernel<D, P>), k_threads));
  });
  return out;
}

AISP_REGISTER_VARIANT_WITH_FACTS(PagedAttentionProblem, launch, facts, .step = 2, .slug = "warp_per_page",
                                 .kind = VariantKind::step,
                                 .summary = "a warp per page: 16-byte loads across head_dim, per-warp online "
                                            "softmax, warps merged once");

}  // namespace aisp::ch16::paged_attention::v02
