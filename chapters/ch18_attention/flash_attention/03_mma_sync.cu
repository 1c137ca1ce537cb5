// ch18:flash_attention:03_mma_sync — FlashAttention-2's structure on the tensor cores (mma.sync).
//
// What changed: both products of step 02 move to the tensor cores, and each warp runs the whole
// algorithm for its own 16 query rows, so no score or weight is shared between warps. A block of 4 warps
// owns 64 query rows; per tile of 64 keys each warp computes its 16 x 64 score tile with
// mma.sync.m16n8k16 (bf16 in, fp32 accumulate) on ldmatrix fragments of Q and K, updates the online
// softmax in the accumulator registers (a row's 64 scores sit in the 4 lanes of a quad: two shuffles
// give its max), rounds P to bf16 and feeds it straight back as the A operand of the P V mma: the m16n8
// accumulator layout of two adjacent key groups is exactly the m16n8k16 A-fragment layout, so P never
// touches shared memory. V's fragments come from ldmatrix.trans (V is stored key-major, the mma wants
// it key-contiguous per column). K and V tiles are double-buffered with cp.async (the next tile's copy
// runs under this tile's MMAs); rows past seq are zero-filled by the copy itself. Under the causal mask
// tiles past the diagonal are skipped and only tiles that cross it (or the end of seq) pay for the mask.
// Why it should help: ~16x the FLOP rate of step 02's FMA loop, with the same DRAM traffic (Q, K, V,
// O once, K/V re-read from L2 by each query tile).
// Napkin math: 1.1 TFLOP; at ~40% of the dense bf16 rate (what ch10's mma.sync + cp.async GEMM reached
// on Hopper, ~300 TFLOP/s) ~3.7 ms, 2x faster than step 01 and 2.3x slower than cuDNN. The softmax is
// not free here: per 64 x 64 tile a warp also spends ~1 exp2, ~3 FMUL/FFMA and the shuffles per score on
// the FP32 and SFU pipes beside 2 x 64 x 64 x D tensor FLOPs, the overhead FlashAttention-3's ping-pong
// and intra-warpgroup overlap hide (steps 05-07).
// Shared memory: Q 64 x D + 2 stages of K and V: 40 / 80 / 160 KiB for D = 64 / 128 / 256.
// Run: aisp bench run --targets ch18:flash_attention:03_mma_sync
// PTX ISA: "Warp-level Matrix Multiply-Accumulate Instructions: mma" (m16n8k16 .bf16 fragment layouts),
// "ldmatrix" (.trans), "cp.async" (cp-size 16 with src-size 0: zero fill), "cp.async.wait_group".
#include <cuda_bf16.h>

#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v03 {

constexpr int BR = 64, BC = 64;  // query rows per block (16 per warp), keys per tile
constexpr int k_warps = 4, k_threads = 32 * k_warps;
constexpr float k_log2e = 1.4426950408889634f;

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

// ROWS rows of a [seq][D] head starting at row0 into shared memory; rows past seq are zero-filled
// (src-size 0: nothing is read, 16 zero bytes are written), so masked keys multiply zeros, not garbage.
template <int D, int ROWS>
__device__ inline void load_tile_async(unsigned smem, const __nv_bfloat16* head, int row0, int seq) {
  for (int p = threadIdx.x; p < ROWS * D / 8; p += k_threads) {
    const int row = p / (D / 8), piece = p % (D / 8);
    const bool inside = row0 + row < seq;
    const __nv_bfloat16* src = head + (inside ? std::size_t(row0) + row : 0) * D + piece * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(swizzled<D>(smem, row, piece)),
                 "l"(src), "r"(inside ? 16 : 0)
                 : "memory");
  }
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
// keys n * 8 + 2 (l % 4) and +1. Masked: past seq, or (causal) after the row's query.
__device__ inline void apply_mask(float (&s)[BC / 8][4], int k0, int row0, int lane, int seq, bool causal) {
#pragma unroll
  for (int n = 0; n < BC / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + n * 8 + lane % 4 * 2 + e % 2, row = row0 + lane / 4 + e / 2 * 8;
      if (key >= seq || (causal && key > row)) s[n][e] = -INFINITY;
    }
  }
}

// Online softmax over this tile for the thread's two rows (h = 0: row l/4, h = 1: row l/4 + 8): s becomes
// p = exp2(s * scale_log2 - m_new), the output and the thread's partial l are rescaled by
// exp2(m_old - m_new). l stays per thread (its 16 columns of the row) until the end: every lane of the
// quad rescales by the same factor, so the quad's partial sums add up at the end.
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

template <int D>
__global__ void __launch_bounds__(k_threads) flash_mma_kernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned q_s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned kv_s = q_s + Smem<D>::q_bytes;  // stage i: K at kv_s + 2i tiles, V one tile after
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = (a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;  // causal: longest first
  const __nv_bfloat16* k_head = a.k + head_offset(a, blockIdx.z, kv_head_of(a, blockIdx.y), a.kv_heads);
  const __nv_bfloat16* v_head = a.v + head_offset(a, blockIdx.z, kv_head_of(a, blockIdx.y), a.kv_heads);
  const int key_end = a.causal ? min(a.seq, q0 + BR) : a.seq;
  const int tiles = (key_end + BC - 1) / BC;

  load_tile_async<D, BR>(q_s, a.q + head_offset(a, blockIdx.z, blockIdx.y, a.heads), q0, a.seq);
  load_tile_async<D, BC>(kv_s, k_head, 0, a.seq);
  load_tile_async<D, BC>(kv_s + Smem<D>::tile_bytes, v_head, 0, a.seq);
  asm volatile("cp.async.commit_group;" ::: "memory");

  const float scale_log2 = a.scale * k_log2e;
  float o[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int t = 0; t < tiles; ++t) {
    // Tile t has landed for this thread; the barrier makes it everyone's, and certifies that all warps
    // are done with tile t - 1, whose stage the next copy overwrites.
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (t + 1 < tiles) {
      const unsigned next = kv_s + (t + 1) % 2 * 2 * Smem<D>::tile_bytes;
      load_tile_async<D, BC>(next, k_head, (t + 1) * BC, a.seq);
      load_tile_async<D, BC>(next + Smem<D>::tile_bytes, v_head, (t + 1) * BC, a.seq);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    const unsigned k_s = kv_s + t % 2 * 2 * Smem<D>::tile_bytes, v_s = k_s + Smem<D>::tile_bytes;

    float s[BC / 8][4] = {};
    scores<D>(s, q_s, k_s, warp, lane);
    const int k0 = t * BC, warp_row0 = q0 + warp * 16;
    if (k0 + BC > a.seq || (a.causal && k0 + BC - 1 > warp_row0)) {  // warp-uniform: most tiles skip it
      apply_mask(s, k0, warp_row0, lane, a.seq, a.causal);
    }
    online_softmax<D>(s, m, l, o, scale_log2);
    accumulate_pv<D>(o, s, v_s, lane);
  }

  __nv_bfloat16* o_head = a.o + head_offset(a, blockIdx.z, blockIdx.y, a.heads);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float row_l = l[h] + __shfl_xor_sync(0xffffffffu, l[h], 1);
    row_l += __shfl_xor_sync(0xffffffffu, row_l, 2);
    const int row = q0 + warp * 16 + lane / 4 + h * 8;
    if (row >= a.seq) continue;
    const float inv_l = 1.0f / row_l;
    __nv_bfloat16* dst = o_head + std::size_t(row) * D + lane % 4 * 2;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[n][2 * h] * inv_l, o[n][2 * h + 1] * inv_l);
    }
  }
}

template <int D>
const void* kernel_ptr() {
  static const bool configured = [] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(flash_mma_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Smem<D>::bytes));
    return true;
  }();
  (void)configured;
  return reinterpret_cast<const void*>(&flash_mma_kernel<D>);
}

template <int D>
void launch_d(const Args& a, cudaStream_t stream) {
  kernel_ptr<D>();
  const dim3 grid((a.seq + BR - 1) / BR, a.heads, a.batch);
  flash_mma_kernel<D><<<grid, k_threads, Smem<D>::bytes, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

void launch(const Args& a, cudaStream_t stream) {
  require_head_dim(a.head_dim, "ch18:flash_attention:03_mma_sync");
  if (a.head_dim == 64) launch_d<64>(a, stream);
  if (a.head_dim == 128) launch_d<128>(a, stream);
  if (a.head_dim == 256) launch_d<256>(a, stream);
}

std::vector<Fact> facts(const Args& a) {
  require_head_dim(a.head_dim, "ch18:flash_attention:03_mma_sync");
  const void* k = a.head_dim == 64    ? kernel_ptr<64>()
                  : a.head_dim == 128 ? kernel_ptr<128>()
                                      : kernel_ptr<256>();
  const int smem = a.head_dim == 64    ? Smem<64>::bytes
                   : a.head_dim == 128 ? Smem<128>::bytes
                                       : Smem<256>::bytes;
  return standard_facts(kernel_facts(k, k_threads, smem));
}

AISP_REGISTER_VARIANT_WITH_FACTS(FlashAttentionProblem, launch, facts, .step = 3, .slug = "mma_sync",
                                 .kind = VariantKind::step,
                                 .summary =
                                     "FlashAttention-2: mma.sync m16n8k16 + ldmatrix, 16 rows per "
                                     "warp, P in registers, cp.async double-buffered K/V",
                                 .min_cc = 80);

}  // namespace aisp::ch18::flash_attention::v03
