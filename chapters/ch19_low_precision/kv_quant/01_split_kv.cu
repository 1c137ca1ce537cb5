// ch19:kv_quant:01_split_kv — a sound split-KV decode kernel, one element per lane access.
//
// What it is: flash-decoding (ch16:paged_attention steps 03 and 04, on a contiguous cache). A block of
// four warps per (sequence, KV head, split of the context); the group's four query heads share every K
// and V row the block loads (grouped-query attention: the cache is read once, not once per query head).
// Each warp walks tiles of 8 rows, keeps an online softmax per query head (running max, sum and
// accumulator, rescaled as the max grows), the four warps merge in shared memory, and the block writes
// its unnormalized partial result; a second kernel (split_merge.cuh) merges the splits. The split count
// comes from the SM count and the kernel's occupancy (split_merge.cuh, the `splits` fact).
// Lane geometry: 16 lanes per row, lane c holding dims c, c + 16, ..., c + 112 of its row, so a warp-wide
// access reads 2 rows, 16 consecutive elements each (coalesced). Every access is one element: a 2-byte
// load at bf16, a 1-byte load at FP8, each FP8 code converted to float on its own and multiplied by its
// block's scale (dequantize, then compute: the first thing one writes).
// Napkin math (H100 SXM datasheet, ~3.35 TB/s): the defaults' 537 MB (bf16) or 268 MB (FP8) need ~160 us
// or ~80 us. The scalar accesses are many small requests: 32 load instructions per lane per tile of K
// and as many of V, 64 B per warp-wide load at bf16, 32 B at FP8. At FP8 each element also costs a
// conversion (cvt.rn.f16x2.e4m3x2 on one byte, then f16 -> f32) and a multiply by the scale before its 4
// FMAs: the instruction count per byte doubles while the bytes halve. Expect the bf16 run to get a fair
// share of the bandwidth and the FP8 run to gain less than the 2x its bytes promise.
// Run: aisp bench run --targets ch19:kv_quant:01_split_kv
#include "chapters/ch19_low_precision/kv_quant/problem.hpp"
#include "chapters/ch19_low_precision/kv_quant/split_merge.cuh"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::kv_quant::v01 {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int k_lanes_per_row = 16;
constexpr int k_per_lane = k_head_dim / k_lanes_per_row;   // 8 dims per lane, strided by 16
constexpr int k_rows_per_load = 32 / k_lanes_per_row;      // 2 rows per warp-wide access
constexpr int k_loads = 4;                                 // row pairs per tile
constexpr int k_tile_rows = k_rows_per_load * k_loads;     // 8 rows per warp per tile
constexpr int G = k_group;
constexpr unsigned k_full_mask = 0xffffffffu;

// The running softmax of one warp per query head of the group: max and sum are warp-uniform; acc holds
// the lane's 8 dims, summed over the rows that lane reads.
struct WarpState {
  float m[G];
  float l[G] = {};
  float acc[G][k_per_lane] = {};
  __device__ WarpState() {
#pragma unroll
    for (int g = 0; g < G; ++g) m[g] = -INFINITY;
  }
};

// One element as the attention reads it: bf16 widened, or an FP8 code decoded and scaled.
__device__ float load_dequant(const __nv_bfloat16* p, float) { return __bfloat162float(*p); }
__device__ float load_dequant(const __nv_fp8_e4m3* p, float scale) {
  return static_cast<float>(*p) * scale;
}

// Sum (max) over the lanes whose index differs only in the bits from..to: <1, 16> are the lanes of one
// row, <16, 32> the two lanes of one column.
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

// One tile (rows of k and v, `valid` >= 1 of them holding tokens of this split) into the warp's running
// softmax. Lane (row0, col) reads rows row0 + 2 i, dims col + 16 j of each; rows past `valid` are never
// loaded (past the last split they would be the next block's, or past the end of the cache).
template <class T>
__device__ void attend_tile(const T* k, const T* v, int valid, const float (&q)[G][k_per_lane],
                            float k_scale, float v_scale, int row0, int col, WarpState& st) {
  float s[k_loads][G];
#pragma unroll
  for (int i = 0; i < k_loads; ++i) {
    const int r = row0 + k_rows_per_load * i;
    const bool in = r < valid;
    float kf[k_per_lane];
#pragma unroll
    for (int j = 0; j < k_per_lane; ++j) {
      kf[j] = in ? load_dequant(k + r * k_head_dim + col + k_lanes_per_row * j, k_scale) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < k_per_lane; ++j) dot = fmaf(q[g][j], kf[j], dot);
      const float sum = xor_sum<1, k_lanes_per_row>(dot);  // every lane shuffles, valid row or not
      s[i][g] = in ? sum : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float m_tile = -INFINITY;
#pragma unroll
    for (int i = 0; i < k_loads; ++i) m_tile = fmaxf(m_tile, s[i][g]);
    const float m_new = fmaxf(st.m[g], xor_max<k_lanes_per_row, 32>(m_tile));  // finite: row 0 is valid
    const float alpha = exp2f(st.m[g] - m_new);
    float l_tile = 0.0f;
#pragma unroll
    for (int i = 0; i < k_loads; ++i) l_tile += (s[i][g] = exp2f(s[i][g] - m_new));
    st.l[g] = st.l[g] * alpha + xor_sum<k_lanes_per_row, 32>(l_tile);
    st.m[g] = m_new;
#pragma unroll
    for (int j = 0; j < k_per_lane; ++j) st.acc[g][j] *= alpha;
  }
#pragma unroll
  for (int i = 0; i < k_loads; ++i) {
    const int r = row0 + k_rows_per_load * i;
    const bool in = r < valid;
    float vf[k_per_lane];
#pragma unroll
    for (int j = 0; j < k_per_lane; ++j) {
      vf[j] = in ? load_dequant(v + r * k_head_dim + col + k_lanes_per_row * j, v_scale) : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int j = 0; j < k_per_lane; ++j) st.acc[g][j] = fmaf(s[i][g], vf[j], st.acc[g][j]);
    }
  }
}

// Block (blockIdx.x = b * kv_heads + kv head, blockIdx.y = split): the split's tokens
// [split * tokens_per_split, + tokens_per_split) of that (sequence, KV head), for its G query heads.
template <class T>
__global__ void __launch_bounds__(k_threads)
    split_kv_kernel(const Args a, int tokens_per_split, Partials part) {
  __shared__ float m_s[k_warps][G], l_s[k_warps][G];
  __shared__ float acc_s[k_warps][G][k_head_dim];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % k_lanes_per_row, row0 = lane / k_lanes_per_row;
  const int blk = blockIdx.x;      // b * kv_heads + kvh: the cache block and its scales
  const int head0 = blk * G;       // b * heads + kvh * G: the group's first query head (q, out, partials)

  float k_scale = 1.0f, v_scale = 1.0f;
  if constexpr (is_fp8<T>) {
    k_scale = a.k_scale[blk];
    v_scale = a.v_scale[blk];
  }
  // q pre-scaled by softmax_scale * log2(e): the scores come out in the log2 domain, for exp2f.
  float q[G][k_per_lane];
  const float qs = a.softmax_scale * k_log2e;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* qg = a.q + static_cast<std::int64_t>(head0 + g) * k_head_dim;
#pragma unroll
    for (int j = 0; j < k_per_lane; ++j) q[g][j] = __bfloat162float(qg[col + k_lanes_per_row * j]) * qs;
  }

  const std::int64_t cache0 = static_cast<std::int64_t>(blk) * a.context * k_head_dim;
  const T* k = static_cast<const T*>(a.k) + cache0;
  const T* v = static_cast<const T*>(a.v) + cache0;
  const int first = blockIdx.y * tokens_per_split;  // < context: every split holds a token
  const int last = min(first + tokens_per_split, a.context);
  WarpState st;
  for (int r = first + warp * k_tile_rows; r < last; r += k_warps * k_tile_rows) {
    const std::int64_t at = static_cast<std::int64_t>(r) * k_head_dim;
    attend_tile<T>(k + at, v + at, last - r, q, k_scale, v_scale, row0, col, st);
  }

  // The two lanes of a column hold different rows' sums under the same (warp-uniform) max: add them.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < k_per_lane; ++j) st.acc[g][j] = xor_sum<k_lanes_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < k_per_lane; ++j) acc_s[warp][g][col + k_lanes_per_row * j] = st.acc[g][j];
    }
    if (lane == 0) {
      m_s[warp][g] = st.m[g];  // -inf for a warp that had no tile: it weighs exp2(-inf) = 0 below
      l_s[warp][g] = st.l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * k_head_dim; i += k_threads) {
    const int g = i / k_head_dim, d = i % k_head_dim;
    float m = m_s[0][g];  // finite: warp 0 always has a tile
    for (int w = 1; w < k_warps; ++w) m = fmaxf(m, m_s[w][g]);
    float l = 0.0f, o = 0.0f;
    for (int w = 0; w < k_warps; ++w) {
      const float f = exp2f(m_s[w][g] - m);
      l += l_s[w][g] * f;
      o += acc_s[w][g][d] * f;
    }
    // Unnormalized: the merge needs (m, l, acc) of every split before it can divide.
    const std::int64_t at = static_cast<std::int64_t>(head0 + g) * gridDim.y + blockIdx.y;
    part.acc[at * k_head_dim + d] = o;
    if (d == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

class SplitKv {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_format(a, [&]<class T>() {
      AISP_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, split_kv_kernel<T>, k_threads, 0));
    });
    m_scratch.make(a, per_sm);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_format(a, [&]<class T>() {
      const dim3 grid(a.batch * k_kv_heads, m_scratch.splits());
      split_kv_kernel<T><<<grid, k_threads, 0, stream>>>(a, m_scratch.tokens_per_split(),
                                                         m_scratch.partials());
      AISP_CHECK_LAUNCH();
    });
    launch_merge(a, m_scratch, stream);
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_format(a, [&]<class T>() {
      out = standard_facts(kernel_facts(reinterpret_cast<const void*>(split_kv_kernel<T>), k_threads));
    });
    for (auto& f : m_scratch.facts()) out.push_back(std::move(f));
    for (auto& f : quant_facts(a)) out.push_back(std::move(f));
    return out;
  }

 private:
  SplitScratch m_scratch;
};

AISP_REGISTER_STATEFUL_VARIANT(KvQuantProblem, SplitKv, .step = 1, .slug = "split_kv",
                               .kind = VariantKind::baseline,
                               .summary = "split-KV decode (block per sequence, KV head, split; GQA group "
                                          "shares each row), scalar loads, FP8 dequantized per element");

}  // namespace aisp::ch19::kv_quant::v01
