// The pieces of ch18:flash_attention:03_mma_sync that work on one tile in shared memory: the swizzled
// layout, the zero-filling cp.async, the ldmatrix / mma.sync fragments of S = Q K^T and O += P V, the
// mask and the online softmax, for a block of 4 warps, 16 query rows each, over 64-key tiles. Step 03
// reads its Q, K and V from dense [seq][D] heads; the serving engine's prefill attention
// (serving/gpu/attention_prefill.cu) gathers the same tiles through a block table, and computes on them
// with these functions, so the engine runs the kernel the lesson teaches.
// PTX ISA: "Warp-level Matrix Multiply-Accumulate Instructions: mma" (m16n8k16 .bf16 fragment layouts),
// "ldmatrix" (.trans), "cp.async" (cp-size 16 with src-size 0: zero fill).
#pragma once

#include <cuda_bf16.h>

namespace aisp::ch18::flash_attention::mma_tile {

constexpr int BR = 64, BC = 64;  // query rows per block (16 per warp), keys per tile
constexpr int k_warps = 4, k_threads = 32 * k_warps;
constexpr float k_log2e = 1.4426950408889634f;
static_assert(BR == 16 * k_warps, "each warp owns 16 query rows");

template <int D>
struct Smem {
  static constexpr int row_bytes = D * 2;         // one bf16 row of Q, K or V
  static constexpr int q_bytes = BR * row_bytes;  // Q tile, then stages of (K tile, V tile)
  static constexpr int tile_bytes = BC * row_bytes;
  static constexpr int bytes = q_bytes + 4 * tile_bytes;
};

// Rows of D bf16 are D / 8 pieces of 16 bytes, a multiple of 128 bytes. Piece p of row r is stored at
// p ^ (r % 8): the 8 rows an 8x8 ldmatrix reads (same piece, consecutive rows) land in 8 different bank
// groups, for K and Q (ldmatrix) as for V (ldmatrix.trans), and so do a warp's cp.async stores.
template <int D>
__device__ inline unsigned swizzled(unsigned base, int row, int piece) {
  return base + row * Smem<D>::row_bytes + ((piece ^ (row % 8)) * 16);
}

// 16 bytes from global to shared memory, asynchronously; !valid reads nothing and writes 16 zero bytes
// (src-size 0), so rows past the end multiply zeros, not garbage.
__device__ inline void cp_async16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same four 8x8 matrices, each delivered transposed: lane l gets column l/4, rows 2(l%4) and +1.
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D for one 16x8x16 tile; A row-major, B "col" (k contiguous per column n).
__device__ inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half: the lower k index
  return *reinterpret_cast<const unsigned*>(&v);
}

// S (16 x BC per warp) = Q K^T. A fragments: lanes 0-15 address rows 0-15 at piece 2kk, lanes 16-31 the
// same rows at piece 2kk+1. B: one x4 covers two n8 key groups: (keys 0-7, k 0-7), (0-7, 8-15),
// (8-15, 0-7), (8-15, 8-15); rows = keys with d contiguous is exactly the "col" B layout.
template <int D>
__device__ inline void scores(float (&s)[BC / 8][4], unsigned q_s, unsigned k_s, int warp, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    unsigned qa[4];
    ldmatrix_x4(qa, swizzled<D>(q_s, warp * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
    for (int j = 0; j < BC / 16; ++j) {
      unsigned kb[4];
      ldmatrix_x4(kb, swizzled<D>(k_s, j * 16 + lane % 8 + lane / 16 * 8, kk * 2 + lane / 8 % 2));
      mma_bf16(s[2 * j], qa, kb[0], kb[1]);
      mma_bf16(s[2 * j + 1], qa, kb[2], kb[3]);
    }
  }
}

// Accumulator layout of m16n8: lane l holds row l/4 (entries 0, 1) and row l/4 + 8 (entries 2, 3), at
// keys n * 8 + 2 (l % 4) and +1. Masked: keys at or past key_end, and (causal) keys after the row's
// position; row0 is the position of the warp's first query row.
__device__ inline void apply_mask(float (&s)[BC / 8][4], int k0, int row0, int lane, int key_end,
                                  bool causal) {
#pragma unroll
  for (int n = 0; n < BC / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + n * 8 + lane % 4 * 2 + e % 2, row = row0 + lane / 4 + e / 2 * 8;
      if (key >= key_end || (causal && key > row)) s[n][e] = -INFINITY;
    }
  }
}

// Online softmax over this tile for the thread's two rows (h = 0: row l/4, h = 1: row l/4 + 8): s becomes
// p = exp2(s * scale_log2 - m_new), the output and the thread's partial l are rescaled by
// exp2(m_old - m_new). l stays per thread (its 16 columns of the row) until the end: every lane of the
// quad rescales by the same factor, so the quad's partial sums add up at the end (row_sum).
template <int D>
__device__ inline void online_softmax(float (&s)[BC / 8][4], float (&m)[2], float (&l)[2],
                                      float (&o)[D / 8][4], float scale_log2) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));  // the quad holds the row
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m[h], tile_max * scale_log2);
    const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays empty, not NaN
    const float alpha = exp2f(m[h] - base);
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) {
      s[n][2 * h] = exp2f(fmaf(s[n][2 * h], scale_log2, -base));
      s[n][2 * h + 1] = exp2f(fmaf(s[n][2 * h + 1], scale_log2, -base));
      sum += s[n][2 * h] + s[n][2 * h + 1];
    }
    l[h] = l[h] * alpha + sum;
    m[h] = m_new;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][2 * h] *= alpha;
      o[n][2 * h + 1] *= alpha;
    }
  }
}

// O (16 x D per warp) += P V. P's A fragment for keys 16kk..16kk+15 is the accumulators of key groups
// 2kk and 2kk+1, packed to bf16: (row g, k 2t..), (row g+8, k 2t..), (row g, k 2t+8..), (row g+8, 2t+8..).
// V is [key][d]: an 8x8 matrix of 8 keys x 8 columns, transposed by ldmatrix.trans, gives lane l the
// keys 2(l%4), +1 of column l/4: the B fragment. One x4: (keys 0-7, d 0-7), (8-15, 0-7), (0-7, 8-15),
// (8-15, 8-15) = b0, b1 of column group 2dp, then of 2dp+1.
template <int D>
__device__ inline void accumulate_pv(float (&o)[D / 8][4], const float (&p)[BC / 8][4], unsigned v_s,
                                     int lane) {
#pragma unroll
  for (int kk = 0; kk < BC / 16; ++kk) {
    const unsigned pa[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]), pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                            pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                            pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      unsigned vb[4];
      ldmatrix_x4_trans(vb, swizzled<D>(v_s, kk * 16 + lane / 8 % 2 * 8 + lane % 8, dp * 2 + lane / 16));
      mma_bf16(o[2 * dp], pa, vb[0], vb[1]);
      mma_bf16(o[2 * dp + 1], pa, vb[2], vb[3]);
    }
  }
}

// The row's softmax denominator: the sum of its quad's partial l (online_softmax).
__device__ inline float row_sum(float l) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  return l + __shfl_xor_sync(0xffffffffu, l, 2);
}

// Row h of the thread's two (l/4 + 8h) divided by its denominator, as bf16 pairs: dst points at the
// row's output and the thread's column lane % 4 * 2; the row's D columns are written by its quad.
template <int D>
__device__ inline void store_row(__nv_bfloat16* dst, const float (&o)[D / 8][4], int h, float inv_l) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
        __floats2bfloat162_rn(o[n][2 * h] * inv_l, o[n][2 * h + 1] * inv_l);
  }
}

}  // namespace aisp::ch18::flash_attention::mma_tile
