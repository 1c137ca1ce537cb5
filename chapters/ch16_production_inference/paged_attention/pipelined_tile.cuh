// ch16:paged_attention — the pieces of step 05 (05_pipelined.cu) that the serving engine's decode kernel
// (serving/gpu/attention_decode.cu) runs too: the tile geometry of a page, a warp's online-softmax state,
// the 16-byte cp.async copies into a warp's two-stage buffer, and the math of one tile for every query
// head of a KV head's group. One copy, so that the engine's kernel is the ladder's, not a look-alike.
// PTX ISA: "Data Movement and Conversion Instructions: cp.async" (src-size < cp-size zero-fills the
// rest), "cp.async.commit_group", "cp.async.wait_group".
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace aisp::ch16::paged_attention::pipelined {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int k_stages = 2;
constexpr unsigned k_full_mask = 0xffffffffu;

// Step 04's geometry, tiles capped at 8 loads per lane (it only bites at a group of 1 or 2 with
// head_dim 128 and pages of 32), so that a stage is at most 8 KiB of K and V per warp.
template <int D, int P, int GS>
struct PageGeometry {
  static constexpr int vecs_per_row = D / 8;                // lanes per row: 16 at D = 128, 8 at 64
  static constexpr int rows_per_load = 32 / vecs_per_row;  // rows per warp-wide load: 2 or 4
  static constexpr int loads = std::min({P / rows_per_load, 32 / GS, 8});
  static constexpr int rows_per_tile = rows_per_load * loads;
  static constexpr int tiles_per_page = P / rows_per_tile;
  static constexpr int stage_vecs = 2 * 32 * loads;          // K then V, 16-byte vectors
  static_assert(P % rows_per_tile == 0, "a page must be whole tiles");
};

// Shared memory per block: the warps' stages; after the loop the same bytes hold the warps' accumulators.
template <int D, int P, int GS>
constexpr std::size_t smem_bytes() {
  using G = PageGeometry<D, P, GS>;
  return std::max(sizeof(uint4) * k_warps * k_stages * G::stage_vecs, sizeof(float) * k_warps * GS * D);
}

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

inline __device__ void to_float8(uint4 raw, float (&f)[8]) {
  Vec8 v{raw};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(v.pair[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

template <int from, int to>
inline __device__ float xor_sum(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}
template <int from, int to>
inline __device__ float xor_max(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

// 16 bytes global -> shared without registers; src_size 0 reads nothing and writes zeros (.cg: L2 only,
// the bytes are used once).
inline __device__ void cp_async16(uint4* dst, const uint4* src, bool valid) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
inline __device__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int n>
inline __device__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}

// Step 04's attend_tile, reading the tile from the lane's own vectors of a stage: ks[32 i + lane] is
// row row0 + rows_per_load i, column col, zero where that row is past `valid` (>= 1).
template <int D, int P, int GS>
inline __device__ void attend_tile(const uint4* ks, const uint4* vs, int valid, const float (&q)[GS][8], int row0,
                            int lane, WarpState<GS>& st) {
  using G = PageGeometry<D, P, GS>;
  float s[G::loads][GS];
#pragma unroll
  for (int i = 0; i < G::loads; ++i) {
    float kf[8];
    to_float8(ks[32 * i + lane], kf);
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
    float vf[8];
    to_float8(vs[32 * i + lane], vf);
#pragma unroll
    for (int g = 0; g < GS; ++g) {
#pragma unroll
      for (int j = 0; j < 8; ++j) st.acc[g][j] = fmaf(s[i][g], vf[j], st.acc[g][j]);
    }
  }
}

}  // namespace aisp::ch16::paged_attention::pipelined
