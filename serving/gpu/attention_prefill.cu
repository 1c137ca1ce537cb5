// Prefill attention (a chunk of n_new > 1 query tokens per sequence) over the paged cache, on the tensor
// cores: the design of ch18:flash_attention:03_mma_sync (FlashAttention-2, mma.sync m16n8k16, ldmatrix,
// P kept in registers, K/V double-buffered by cp.async) with three changes for the engine:
// - a block is one (sequence, 64-query tile) of the host's tile list x one query head, so a ragged batch
//   is one launch and no query row of another sequence is computed;
// - K and V tiles are gathered through the block table: key j is slot j % block_size of page
//   table[j / block_size] (a 64-key tile spans 64 / block_size pages, each row 16-byte aligned);
// - the causal mask is offset: the chunk's query i sits at position start + i and sees keys 0..start + i,
//   the cached prefix included.
// Each warp owns 16 query rows; every tile's scores, online softmax and P V stay in registers.
// Shared memory: Q 64 x D + 2 stages of K and V tiles: 40 KiB (D = 64), 80 KiB (D = 128).
// PTX ISA: "mma" (m16n8k16 .bf16 fragment layouts), "ldmatrix" (.trans), "cp.async" (src-size 0).
#include <cuda_bf16.h>

#include <cstdint>

#include "device/cuda_check.hpp"
#include "serving/gpu/attention.hpp"
#include "serving/gpu/current_device.hpp"

namespace aisp::serving::gpu {
namespace {

constexpr int BR = k_prefill_tile_rows, BC = 64;  // query rows per block (16 per warp), keys per tile
constexpr int k_warps = 4, k_threads = 32 * k_warps;
constexpr float k_log2e = 1.4426950408889634f;
static_assert(BR == 16 * k_warps, "each warp owns 16 query rows");

template <int D>
struct Smem {
  static constexpr int row_bytes = D * 2;
  static constexpr int q_bytes = BR * row_bytes;
  static constexpr int tile_bytes = BC * row_bytes;
  static constexpr int bytes = q_bytes + 4 * tile_bytes;
};

// Piece p (16 bytes) of row r at p ^ (r % 8): ldmatrix's 8 rows and the cp.async stores hit 8 bank groups.
template <int D>
__device__ inline unsigned swizzled(unsigned base, int row, int piece) {
  return base + row * Smem<D>::row_bytes + ((piece ^ (row % 8)) * 16);
}

__device__ inline void cp_async16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

// The tile's query rows (q heads of the fused QKV rows); rows past the chunk are zero-filled.
template <int D>
__device__ inline void load_q_async(unsigned smem, const AttentionArgs& a, int token0, int rows, int head) {
  for (int p = threadIdx.x; p < BR * D / 8; p += k_threads) {
    const int row = p / (D / 8), piece = p % (D / 8);
    const bool inside = row < rows;
    const __nv_bfloat16* src =
        a.qkv + static_cast<std::int64_t>(token0 + (inside ? row : 0)) * a.qkv_stride + head * D + piece * 8;
    cp_async16(swizzled<D>(smem, row, piece), src, inside);
  }
}

// Keys key0 .. key0 + BC - 1 of one KV head from the paged pool; keys at or past key_end are zero-filled
// (and masked), their page never looked up.
template <int D>
__device__ inline void load_kv_async(unsigned smem, const __nv_bfloat16* pool, const AttentionArgs& a,
                                     const std::int32_t* table, int kv_head, int key0, int key_end) {
  for (int p = threadIdx.x; p < BC * D / 8; p += k_threads) {
    const int row = p / (D / 8), piece = p % (D / 8);
    const int key = key0 + row;
    const bool inside = key < key_end;
    std::int64_t at = 0;
    if (inside) {
      const std::int64_t page = table[key / a.block_size];
      at = ((page * a.kv_heads + kv_head) * a.block_size + key % a.block_size) * D + piece * 8;
    }
    cp_async16(swizzled<D>(smem, row, piece), pool + at, inside);
  }
}

__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ inline unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

// S (16 x BC per warp) = Q K^T: ch18 step 03's fragment addressing.
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

// m16n8 accumulator layout: lane l holds row l/4 (entries 0, 1) and l/4 + 8 (2, 3) at keys
// n * 8 + 2 (l % 4) and +1. Masked: keys at or past key_end, and keys after the row's position.
__device__ inline void apply_mask(float (&s)[BC / 8][4], int key0, int row_pos0, int lane, int key_end) {
#pragma unroll
  for (int n = 0; n < BC / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + n * 8 + lane % 4 * 2 + e % 2, pos = row_pos0 + lane / 4 + e / 2 * 8;
      if (key >= key_end || key > pos) s[n][e] = -INFINITY;
    }
  }
}

template <int D>
__device__ inline void online_softmax(float (&s)[BC / 8][4], float (&m)[2], float (&l)[2],
                                      float (&o)[D / 8][4], float scale_log2) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));  // a quad holds the row
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

template <int D>
__global__ void __launch_bounds__(k_threads) prefill_attention_kernel(const AttentionArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned q_s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned kv_s = q_s + Smem<D>::q_bytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int seq = a.prefill_tiles[2 * blockIdx.x], q0 = a.prefill_tiles[2 * blockIdx.x + 1];
  const int head = blockIdx.y, kv_head = head / (a.heads / a.kv_heads);
  const int token0 = a.query_start[seq];
  const int n_new = a.query_start[seq + 1] - token0;
  const int context = a.context_len[seq];
  const int start = context - n_new;  // position of the chunk's first query
  const int rows = min(BR, n_new - q0);
  const int key_end = min(context, start + q0 + BR);  // one past the tile's last query position
  const int tiles = (key_end + BC - 1) / BC;
  const std::int32_t* table = a.block_table + static_cast<std::int64_t>(seq) * a.table_stride;

  load_q_async<D>(q_s, a, token0 + q0, rows, head);
  load_kv_async<D>(kv_s, a.k_cache, a, table, kv_head, 0, key_end);
  load_kv_async<D>(kv_s + Smem<D>::tile_bytes, a.v_cache, a, table, kv_head, 0, key_end);
  asm volatile("cp.async.commit_group;" ::: "memory");

  const float scale_log2 = a.scale * k_log2e;
  float o[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int warp_pos0 = start + q0 + warp * 16;  // position of the warp's first query row
  for (int t = 0; t < tiles; ++t) {
    // Tile t landed for this thread; the barrier makes it everyone's and frees the stage of t - 1.
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (t + 1 < tiles) {
      const unsigned next = kv_s + (t + 1) % 2 * 2 * Smem<D>::tile_bytes;
      load_kv_async<D>(next, a.k_cache, a, table, kv_head, (t + 1) * BC, key_end);
      load_kv_async<D>(next + Smem<D>::tile_bytes, a.v_cache, a, table, kv_head, (t + 1) * BC, key_end);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    const unsigned k_s = kv_s + t % 2 * 2 * Smem<D>::tile_bytes, v_s = k_s + Smem<D>::tile_bytes;

    float s[BC / 8][4] = {};
    scores<D>(s, q_s, k_s, warp, lane);
    const int key0 = t * BC;
    if (key0 + BC > key_end || key0 + BC - 1 > warp_pos0) {  // warp-uniform: most tiles skip it
      apply_mask(s, key0, warp_pos0, lane, key_end);
    }
    online_softmax<D>(s, m, l, o, scale_log2);
    accumulate_pv<D>(o, s, v_s, lane);
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float row_l = l[h] + __shfl_xor_sync(0xffffffffu, l[h], 1);
    row_l += __shfl_xor_sync(0xffffffffu, row_l, 2);
    const int row = warp * 16 + lane / 4 + h * 8;
    if (row >= rows) continue;
    const float inv_l = 1.0f / row_l;
    __nv_bfloat16* dst = a.out + static_cast<std::int64_t>(token0 + q0 + row) * a.heads * D +
                         static_cast<std::int64_t>(head) * D + lane % 4 * 2;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[n][2 * h] * inv_l, o[n][2 * h + 1] * inv_l);
    }
  }
}

template <int D>
void launch_d(const AttentionArgs& a, cudaStream_t stream) {
  static PerDevice<bool> configured;  // > 48 KiB of dynamic shared memory needs the opt-in, per device
  (void)configured.get([] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, Smem<D>::bytes));
    return true;
  });
  const dim3 grid(static_cast<unsigned>(a.num_prefill_tiles), static_cast<unsigned>(a.heads));
  prefill_attention_kernel<D><<<grid, k_threads, Smem<D>::bytes, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_prefill_tiles == 0) return;
  if (a.head_dim == 64) {
    launch_d<64>(a, stream);
  } else {
    launch_d<128>(a, stream);
  }
}

}  // namespace aisp::serving::gpu
