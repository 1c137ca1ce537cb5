// ch16:paged_attention:03_split_kv — flash-decoding: split each sequence's context over several blocks.
//
// What changed: a (sequence, head) no longer belongs to one block. Its pages are cut into `splits`
// contiguous runs of pages_per_split pages (grid.y); each block runs step 02's kernel over its run and
// writes its unnormalized partial result, (max, sum, accumulator of head_dim values), to scratch made once
// in setup. A second, small kernel (split_merge.cuh, step 04 uses it too) merges a (sequence, head)'s
// partials with the same rescaling the warps use: M = max m_s, out = sum_s acc_s 2^(m_s - M) /
// sum_s l_s 2^(m_s - M) (Dao et al., "Flash-Decoding for long-context inference", 2023). The split
// count comes from the device, SM count x the occupancy calculator's blocks per SM: the fewest splits
// whose waves of blocks are at least 90% full, with at least 4 pages (one per warp) in a split
// (split_plan.hpp; the run's table shows it as the `splits` fact).
// Why it helps: with a small batch, batch x heads blocks leave most SMs idle for the whole launch (batch 1
// x 32 heads is 32 blocks on a 132-SM GPU) while each block walks the whole context; splitting puts every
// SM to work. With a large batch it only evens out the last wave: at the defaults step 02's 2048 blocks
// make 2.6 waves of 792 (6 blocks per SM at 80 registers), the last one 60% full; here (7 blocks per SM
// at 72 registers, 924 at once) the plan picks 3 splits, 6.6 waves. A memory-bound kernel loses less to
// a part-full wave than the wave count says (fewer blocks each get more bandwidth), so expect 03 close
// to 02 at the defaults; the lesson shows at --axis batch=2.
// Napkin math: the partials are splits x (head_dim + 2) floats per (sequence, head), 3 MB written and
// read at the defaults: 0.15% of the 2.15 GB. At batch 2: 64 blocks for step 02, ~a full wave here.
// Run: aisp bench run --targets ch16:paged_attention:03_split_kv --axis batch=2
#include "chapters/ch16_production_inference/paged_attention/problem.hpp"
#include "chapters/ch16_production_inference/paged_attention/split_merge.cuh"
#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch16::paged_attention::v03 {

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

// Step 02's kernel over one split: pages [split * pages_per_split, +pages_per_split) of (b, h).
template <int D, int P>
__global__ void __launch_bounds__(k_threads)
    split_kv_kernel(const Args a, int pages_per_split, Partials part) {
  using G = PageGeometry<D, P>;
  __shared__ float m_s[k_warps], l_s[k_warps];
  __shared__ float acc_s[k_warps][D];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % G::vecs_per_row, row0 = lane / G::vecs_per_row;
  const int b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int kvh = h / (a.heads / a.kv_heads);
  const std::int64_t qo = static_cast<std::int64_t>(blockIdx.x) * D;  // q: [b][h][:] = blockIdx.x

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
  const int first = blockIdx.y * pages_per_split;  // < pages_per_seq: every split has a page
  const int last = min(first + pages_per_split, a.pages_per_seq);
  for (int pg = first + warp; pg < last; pg += k_warps) {
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
    // Unnormalized: the merge needs (m, l, acc) of every split before it can divide.
    const std::int64_t at = static_cast<std::int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
    part.acc[at * D + threadIdx.x] = o;
    if (threadIdx.x == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

// The split plan and the partials' scratch are made once, in setup (outside timing): they depend only on
// the shape and the device.
class SplitKv {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_shape(a, [&]<int D, int P>() {
      AISP_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, split_kv_kernel<D, P>, k_threads, 0));
    });
    m_plan = plan_splits(a.batch * a.heads, a.pages_per_seq, a.sm_count * per_sm, k_warps);
    const std::size_t n = static_cast<std::size_t>(a.batch) * a.heads * m_plan.splits;
    m_m = DeviceBuffer<float>(n);
    m_l = DeviceBuffer<float>(n);
    m_acc = DeviceBuffer<float>(n * a.head_dim);
  }

  void launch(const Args& a, cudaStream_t stream) {
    const Partials part{m_m.data(), m_l.data(), m_acc.data()};
    const int pairs = a.batch * a.heads;
    with_shape(a, [&]<int D, int P>() {
      split_kv_kernel<D, P><<<dim3(pairs, m_plan.splits), k_threads, 0, stream>>>(a, m_plan.pages_per_split,
                                                                                   part);
      AISP_CHECK_LAUNCH();
      merge_splits_kernel<D><<<pairs, D, 0, stream>>>(a, part, m_plan.splits);
      AISP_CHECK_LAUNCH();
    });
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_shape(a, [&]<int D, int P>() {
      out = standard_facts(kernel_facts(reinterpret_cast<const void*>(split_kv_kernel<D, P>), k_threads));
    });
    out.push_back({"splits", std::to_string(m_plan.splits)});
    out.push_back({"pages_per_split", std::to_string(m_plan.pages_per_split)});
    return out;
  }

 private:
  SplitPlan m_plan;
  DeviceBuffer<float> m_m, m_l, m_acc;
};

AISP_REGISTER_STATEFUL_VARIANT(PagedAttentionProblem, SplitKv, .step = 3, .slug = "split_kv",
                               .kind = VariantKind::step,
                               .summary = "flash-decoding: context split over blocks (count from SMs and "
                                          "occupancy), partials merged by a second kernel");

}  // namespace aisp::ch16::paged_attention::v03
