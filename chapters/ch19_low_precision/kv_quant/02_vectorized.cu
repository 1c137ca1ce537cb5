// ch19:kv_quant:02_vectorized — step 01 with 16-byte loads and, at FP8, the packed conversion.
//
// What changed: every cache access is one 16-byte vector per lane: 8 bf16 or 16 FP8 values of one row,
// contiguous, so a lane owns a run of dims (col * vec .. col * vec + vec - 1) instead of every 16th.
// A row is then 16 lanes at bf16 and 8 at FP8, and a warp-wide access reads 2 or 4 whole rows (512 B).
// A tile is 4 vectors per lane of K and 4 of V, all issued before the tile's math, so a warp has 4 KiB
// of K and V in flight (step 01: at most 32 two-byte or one-byte loads per lane, of K alone). At FP8, two
// codes become two halves in one instruction, cvt.rn.f16x2.e4m3x2 (PTX ISA "Data Movement and Conversion
// Instructions: cvt", sm_89 and later; cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2 emits it; every e4m3 value
// is exact in f16), and the scale is applied once per 16-element chunk in fp32: the chunk's partial
// q.k is multiplied by the K scale, and a row's weight p by the V scale before its 16 FMAs, instead of a
// multiply per element.
// Why it helps: one load instruction moves 8x (bf16) or 16x (FP8) the bytes of step 01's, so the load
// pipeline stops being the limit and more bytes are in flight per warp; at FP8 the decode goes from a
// convert and a multiply per element to half a convert (plus the f16 -> f32 widening).
// Napkin math (H100 SXM datasheet, ~3.35 TB/s): ~160 us (bf16) and ~80 us (FP8) at the defaults. The FP8
// run still executes the same 4 FMAs per element per query head of the group as the bf16 run, per half
// the bytes: ~1024 FMAs and ~384 conversion instructions per 256-byte token (K and V), 5.5 per byte.
// DRAM delivers ~3.35 TB/s / 132 SMs / ~1.75 GHz ~ 14.5 B per clock per SM, so that is ~80 of the SM's
// 128 lane-instructions per clock, ~60% of the issue slots: memory-bound, but not by much. Expect the
// FP8 run near 2x faster than this step's bf16 run at long contexts, where the split merge and the
// launches are amortized.
// Run: aisp bench run --targets ch19:kv_quant:02_vectorized
#include <cuda_fp16.h>

#include "chapters/ch19_low_precision/kv_quant/problem.hpp"
#include "chapters/ch19_low_precision/kv_quant/split_merge.cuh"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::kv_quant::v02 {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int G = k_group;
constexpr unsigned k_full_mask = 0xffffffffu;

// How a warp covers rows of head_dim values with 16-byte vectors of element type T.
template <class T>
struct Geometry {
  static constexpr int vec = 16 / static_cast<int>(sizeof(T));     // 8 (bf16) or 16 (FP8) values
  static constexpr int lanes_per_row = k_head_dim / vec;           // 16 or 8
  static constexpr int rows_per_load = 32 / lanes_per_row;         // 2 or 4 rows per warp-wide load
  static constexpr int loads = 4;                                  // vectors of K (and of V) per lane
  static constexpr int tile_rows = rows_per_load * loads;          // 8 or 16 rows per warp per tile
  static_assert(k_head_dim % vec == 0 && 32 % lanes_per_row == 0, "a row must be whole vectors");
};

template <int V>
struct WarpState {
  float m[G];
  float l[G] = {};
  float acc[G][V] = {};
  __device__ WarpState() {
#pragma unroll
    for (int g = 0; g < G; ++g) m[g] = -INFINITY;
  }
};

// A vector of 8 bf16 as floats (bf16 -> f32 is a shift: exact).
__device__ void to_float(uint4 raw, float (&f)[8]) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    static_assert(sizeof(pair) == sizeof(unsigned));
    memcpy(&pair, &w[i], sizeof(pair));
    const float2 x = __bfloat1622float2(pair);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// A vector of 16 e4m3 codes as their (unscaled) values: two codes per cvt.rn.f16x2.e4m3x2, the lower
// byte into the lower half (element order is memory order), then each half widened to f32. Exact.
__device__ void to_float(uint4 raw, float (&f)[16]) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const auto codes = static_cast<__nv_fp8x2_storage_t>(w[i] >> (16 * h));
      const __half2 pair(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3));
      const float2 x = __half22float2(pair);
      f[4 * i + 2 * h] = x.x;
      f[4 * i + 2 * h + 1] = x.y;
    }
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

// One tile (vectors k[32 i + lane] and v[32 i + lane] of the tile's rows, `valid` >= 1 rows holding
// tokens of this split) into the warp's running softmax. Vector 32 i + lane is row row0 + rows_per_load i,
// column col: the tile's rows are contiguous, so the warp's loads are too.
template <class T>
__device__ void attend_tile(const uint4* k, const uint4* v, int valid,
                            const float (&q)[G][Geometry<T>::vec], float k_scale, float v_scale,
                            int row0, int lane, WarpState<Geometry<T>::vec>& st) {
  using Geo = Geometry<T>;
  uint4 kr[Geo::loads], vr[Geo::loads];
#pragma unroll
  for (int i = 0; i < Geo::loads; ++i) {
    const bool in = row0 + Geo::rows_per_load * i < valid;  // never read past the split
    kr[i] = in ? k[32 * i + lane] : make_uint4(0, 0, 0, 0);
    vr[i] = in ? v[32 * i + lane] : make_uint4(0, 0, 0, 0);
  }
  float s[Geo::loads][G];
#pragma unroll
  for (int i = 0; i < Geo::loads; ++i) {
    float kf[Geo::vec];
    to_float(kr[i], kf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) dot = fmaf(q[g][j], kf[j], dot);
      if constexpr (is_fp8<T>) dot *= k_scale;  // once per 16-element chunk
      const float sum = xor_sum<1, Geo::lanes_per_row>(dot);  // every lane shuffles, valid row or not
      s[i][g] = row0 + Geo::rows_per_load * i < valid ? sum : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float m_tile = -INFINITY;
#pragma unroll
    for (int i = 0; i < Geo::loads; ++i) m_tile = fmaxf(m_tile, s[i][g]);
    const float m_new = fmaxf(st.m[g], xor_max<Geo::lanes_per_row, 32>(m_tile));  // finite: row 0 is valid
    const float alpha = exp2f(st.m[g] - m_new);
    float l_tile = 0.0f;
#pragma unroll
    for (int i = 0; i < Geo::loads; ++i) l_tile += (s[i][g] = exp2f(s[i][g] - m_new));
    st.l[g] = st.l[g] * alpha + xor_sum<Geo::lanes_per_row, 32>(l_tile);
    st.m[g] = m_new;
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] *= alpha;
  }
#pragma unroll
  for (int i = 0; i < Geo::loads; ++i) {
    float vf[Geo::vec];
    to_float(vr[i], vf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float p = s[i][g];
      if constexpr (is_fp8<T>) p *= v_scale;  // once per 16-element chunk; l keeps the unscaled weight
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] = fmaf(p, vf[j], st.acc[g][j]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(k_threads)
    vectorized_kernel(const Args a, int tokens_per_split, Partials part) {
  using Geo = Geometry<T>;
  __shared__ float m_s[k_warps][G], l_s[k_warps][G];
  __shared__ float acc_s[k_warps][G][k_head_dim];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % Geo::lanes_per_row, row0 = lane / Geo::lanes_per_row;
  const int blk = blockIdx.x;  // b * kv_heads + kvh: the cache block and its scales
  const int head0 = blk * G;   // b * heads + kvh * G: the group's first query head (q, out, partials)

  float k_scale = 1.0f, v_scale = 1.0f;
  if constexpr (is_fp8<T>) {
    k_scale = a.k_scale[blk];
    v_scale = a.v_scale[blk];
  }
  float q[G][Geo::vec];
  const float qs = a.softmax_scale * k_log2e;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* qg = a.q + static_cast<std::int64_t>(head0 + g) * k_head_dim + col * Geo::vec;
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) q[g][j] = __bfloat162float(qg[j]) * qs;
  }

  // Rows are head_dim * sizeof(T) = 256 or 128 bytes and cudaMalloc aligns to 256: every row, hence
  // every 16-byte vector, is aligned.
  const std::int64_t cache0 = static_cast<std::int64_t>(blk) * a.context * k_head_dim;
  const T* k = static_cast<const T*>(a.k) + cache0;
  const T* v = static_cast<const T*>(a.v) + cache0;
  const int first = blockIdx.y * tokens_per_split;  // < context: every split holds a token
  const int last = min(first + tokens_per_split, a.context);
  WarpState<Geo::vec> st;
  for (int r = first + warp * Geo::tile_rows; r < last; r += k_warps * Geo::tile_rows) {
    const std::int64_t at = static_cast<std::int64_t>(r) * k_head_dim;
    attend_tile<T>(reinterpret_cast<const uint4*>(k + at), reinterpret_cast<const uint4*>(v + at),
                   last - r, q, k_scale, v_scale, row0, lane, st);
  }

#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] = xor_sum<Geo::lanes_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) acc_s[warp][g][col * Geo::vec + j] = st.acc[g][j];
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
    const std::int64_t at = static_cast<std::int64_t>(head0 + g) * gridDim.y + blockIdx.y;
    part.acc[at * k_head_dim + d] = o;
    if (d == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

class Vectorized {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_format(a, [&]<class T>() {
      AISP_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, vectorized_kernel<T>, k_threads, 0));
    });
    m_scratch.make(a, per_sm);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_format(a, [&]<class T>() {
      const dim3 grid(a.batch * k_kv_heads, m_scratch.splits());
      vectorized_kernel<T><<<grid, k_threads, 0, stream>>>(a, m_scratch.tokens_per_split(),
                                                           m_scratch.partials());
      AISP_CHECK_LAUNCH();
    });
    launch_merge(a, m_scratch, stream);
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_format(a, [&]<class T>() {
      out = standard_facts(kernel_facts(reinterpret_cast<const void*>(vectorized_kernel<T>), k_threads));
    });
    for (auto& f : m_scratch.facts()) out.push_back(std::move(f));
    for (auto& f : quant_facts(a)) out.push_back(std::move(f));
    return out;
  }

 private:
  SplitScratch m_scratch;
};

AISP_REGISTER_STATEFUL_VARIANT(KvQuantProblem, Vectorized, .step = 2, .slug = "vectorized",
                               .kind = VariantKind::step,
                               .summary = "step 01 with 16-byte loads (8 bf16 / 16 FP8 per lane), K and V "
                                          "of a tile in flight together, packed e4m3x2 -> f16x2 conversion",
                               .min_cc = 89);

}  // namespace aisp::ch19::kv_quant::v02
