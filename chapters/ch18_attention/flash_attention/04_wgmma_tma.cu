// ch18:flash_attention:04_wgmma_tma — Hopper's asynchronous tensor cores and copy engine (sm_90a): TMA
// brings the tiles, wgmma multiplies them, no warp specialization yet.
//
// What changed against 03: a block is now 2 warpgroups (8 warps) owning BM = 128 query rows, 64 per
// warpgroup, and both products are warpgroup-wide wgmma.mma_async instructions instead of per-warp
// mma.sync on ldmatrix fragments:
// - S = Q K^T is wgmma m64nBNk16 with both operands read from shared memory through descriptors (Q and
//   K are K-major: head_dim contiguous), one instruction per 16 columns of head_dim;
// - O += P V is wgmma m64nDk16 with A = P taken from registers: the fp32 accumulator layout of S, packed
//   pairwise to bf16, is exactly the register-A fragment layout (as 03's mma.sync trick, now warpgroup
//   wide), and B = V read from shared memory MN-major (head_dim, the GEMM's N, is V's contiguous
//   dimension; the keys are the GEMM's K): the descriptor's transpose bit replaces 03's ldmatrix.trans;
// - tiles arrive by TMA (cp.async.bulk.tensor) instead of cp.async: one thread issues a copy per 64
//   columns of head_dim, the copy engine writes the 128-byte-swizzled layout the descriptors describe
//   and zero-fills rows past seq, and the bytes complete on an mbarrier (expect_tx + complete_tx) that
//   every thread waits on. Q is loaded once; K and V go through a 2-stage ring.
// Everything else is kept simple on purpose, as ch10's 04: each GEMM is waited for in full
// (wgmma.wait_group 0), the softmax runs while the tensor cores idle, and the block meets at
// __syncthreads before a freed stage is refilled. Step 05 splits producer and consumers.
// Tiles: BN = 128 keys for head_dim 64 and 128; 64 for 256 (O alone is 128 fp32 registers per thread
// there). The causal mask, the skipped tiles past the diagonal and the longest-first order are 03's.
// Why it should help: one m64n128k16 wgmma is 16 of 03's m16n8k16 per warp issued by one instruction for
// the whole warpgroup, with no ldmatrix traffic through registers for Q, K or V.
// Napkin math (head_dim 128): per 128 x 128 tile the block does 2 x 2 x 128^3 = 8.4 MFLOP, ~2048 clocks at
// ~4096 dense bf16 FLOP/clock/SM; the softmax's 16 K exp2 (16/clock/SM on the SFU) plus max, FMA and
// conversions add ~1500 clocks that nothing overlaps: 2048 / 3548 ~ 58% of the tensor peak, ~500 TFLOP/s,
// ~2x step 03; 06/07 hide the softmax.
// Shared memory: Q 128 x D + 2 stages of K and V: 80 / 160 / 192 KiB for D = 64 / 128 / 256.
// Run: aisp bench run --targets ch18:flash_attention:04_wgmma_tma
// PTX ISA: "wgmma.mma_async" (register-A form, imm-trans-b), "Matrix Descriptor Format", "Shared Memory
// Matrix Layout" (MN-major 128B swizzling), "cp.async.bulk.tensor", "mbarrier" (expect_tx, try_wait).
#include <cuda_bf16.h>

#include "chapters/ch18_attention/flash_attention/hopper_attention.cuh"
#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v04 {

using namespace hopper_fa;

constexpr int BM = 128;  // query rows per block: 2 warpgroups x 64
constexpr int k_threads = 256, k_stages = 2;
constexpr float k_log2e = 1.4426950408889634f;

// Every tile is stored as D / 64 chunks of [rows][64] (hopper_attention.cuh), 1024-byte aligned.
template <int D>
struct Tile {
  static constexpr int BN = D == 256 ? 64 : 128;  // keys per tile
  static constexpr int chunks = D / k_chunk_cols;
  static constexpr int q_chunk_bytes = BM * k_chunk_row_bytes;
  static constexpr int kv_chunk_bytes = BN * k_chunk_row_bytes;
  static constexpr int q_bytes = BM * D * 2;
  static constexpr int kv_bytes = BN * D * 2;        // K or V
  static constexpr int stage_bytes = 2 * kv_bytes;   // K then V
  static constexpr int smem_bytes = q_bytes + k_stages * stage_bytes + 1024 /* alignment */ + 1024 /* barriers */;
};

__device__ inline unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half: the lower k index
  return *reinterpret_cast<const unsigned*>(&v);
}

// Accumulator layout (hopper_attention.cuh): s[4j + e] is row warp_row0 + lane/4 + 8(e/2), key
// k0 + 8j + 2(lane%4) + e%2. Masked: past seq (TMA zero-filled those keys: their score would be 0, not
// -inf), or (causal) after the row's query.
template <int BN>
__device__ inline void apply_mask(float (&s)[BN / 2], int k0, int warp_row0, int lane, int seq, bool causal) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + 8 * j + lane % 4 * 2 + e % 2, row = warp_row0 + lane / 4 + e / 2 * 8;
      if (key >= seq || (causal && key > row)) s[4 * j + e] = -INFINITY;
    }
  }
}

// 03's online softmax in the wgmma layout: h = 0 is the thread's row lane/4 (entries 4j, 4j+1), h = 1 the
// row 8 below (4j+2, 4j+3); the quad (lanes 4g..4g+3) holds a row, two shuffles give its max. s becomes
// p = exp2(s * scale_log2 - m_new); O and the thread's partial l are rescaled by exp2(m_old - m_new).
template <int D, int BN>
__device__ inline void online_softmax(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&o)[D / 2],
                                      float scale_log2) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) tile_max = fmaxf(tile_max, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m[h], tile_max * scale_log2);
    const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays empty, not NaN
    const float alpha = exp2f(m[h] - base);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      s[4 * j + 2 * h] = exp2f(fmaf(s[4 * j + 2 * h], scale_log2, -base));
      s[4 * j + 2 * h + 1] = exp2f(fmaf(s[4 * j + 2 * h + 1], scale_log2, -base));
      sum += s[4 * j + 2 * h] + s[4 * j + 2 * h + 1];
    }
    l[h] = l[h] * alpha + sum;
    m[h] = m_new;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j + 2 * h] *= alpha;
      o[4 * j + 2 * h + 1] *= alpha;
    }
  }
}

template <int D>
__global__ void __launch_bounds__(k_threads, 1)
    flash_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                       const __grid_constant__ CUtensorMap map_v, Args a) {
  using T = Tile<D>;
  constexpr int BN = T::BN;
  extern __shared__ unsigned char raw[];
  // The 128-byte swizzle repeats every 1024 bytes: chunks start 1024-aligned (descriptor base offset 0).
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* q_s = smem;
  unsigned char* kv_s = smem + T::q_bytes;  // stage i: K chunks at kv_s + i * stage_bytes, V chunks after
  auto* q_full = reinterpret_cast<std::uint64_t*>(kv_s + k_stages * T::stage_bytes);
  std::uint64_t* kv_full = q_full + 1;

  const int q0 = (a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;  // causal: longest first
  const int q_plane = blockIdx.z * a.heads + blockIdx.y;                     // planes of the 3-D maps
  const int kv_plane = blockIdx.z * a.kv_heads + kv_head_of(a, blockIdx.y);
  const int key_end = a.causal ? min(a.seq, q0 + BM) : a.seq;
  const int tiles = (key_end + BN - 1) / BN;

  const auto load_kv = [&](int t) {
    const int s = t % k_stages;
    unsigned char* k_dst = kv_s + s * T::stage_bytes;
    mbar_arrive_expect_tx(&kv_full[s], T::stage_bytes);
#pragma unroll
    for (int c = 0; c < T::chunks; ++c) {
      tma_load_3d(k_dst + c * T::kv_chunk_bytes, &map_k, &kv_full[s], c * k_chunk_cols, t * BN, kv_plane);
      tma_load_3d(k_dst + T::kv_bytes + c * T::kv_chunk_bytes, &map_v, &kv_full[s], c * k_chunk_cols, t * BN,
                  kv_plane);
    }
  };
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < k_stages; ++s) mbar_init(&kv_full[s], 1);
    fence_barrier_init();
    mbar_arrive_expect_tx(q_full, T::q_bytes);
#pragma unroll
    for (int c = 0; c < T::chunks; ++c) {
      tma_load_3d(q_s + c * T::q_chunk_bytes, &map_q, q_full, c * k_chunk_cols, q0, q_plane);
    }
    for (int t = 0; t < tiles && t < k_stages; ++t) load_kv(t);
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them

  const int wg = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int wg_row0 = q0 + 64 * wg;
  const unsigned char* q_wg = q_s + wg * 64 * k_chunk_row_bytes;  // this warpgroup's 64 rows of each chunk
  const float scale_log2 = a.scale * k_log2e;
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;

  mbar_wait(q_full, 0);
  for (int t = 0; t < tiles; ++t) {
    const int s = t % k_stages;
    const unsigned char* k_t = kv_s + s * T::stage_bytes;
    const unsigned char* v_t = k_t + T::kv_bytes;
    mbar_wait(&kv_full[s], (t / k_stages) & 1);  // the (t / 2)-th fill of stage s

    // S = Q K^T: K step kk is head_dim columns 16kk.., chunk kk / 4, +32 bytes per 16 columns in the row.
    float sc[BN / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = kk / 4, byte = kk % 4 * 32;
      wgmma_ss<BN>(sc, smem_desc(q_wg + c * T::q_chunk_bytes + byte), smem_desc(k_t + c * T::kv_chunk_bytes + byte),
                   kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sc);

    const int k0 = t * BN;
    if (k0 + BN > a.seq || (a.causal && k0 + BN - 1 > wg_row0)) {  // warpgroup-uniform: most tiles skip it
      apply_mask<BN>(sc, k0, wg_row0 + 16 * warp, lane, a.seq, a.causal);
    }
    online_softmax<D, BN>(sc, m, l, o, scale_log2);
    // P as the A operand: A register i of K step kk is (rows l/4 | l/4 + 8, keys 16kk + 8(i/2) + 2(l%4), +1)
    // = accumulator entries 8kk + 2i, +1: the packed pairs in order.
    unsigned p[BN / 4];
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) p[i] = pack_bf16(sc[2 * i], sc[2 * i + 1]);

    // O += P V: K step kk is keys 16kk..16kk+15 = two 8-key atoms of every V chunk, 16 x 128 B further.
    fence_regs(o);
    fence_regs(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned pa[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      wgmma_rs<D>(o, pa, smem_desc_mn_major(v_t + kk * 16 * k_chunk_row_bytes, T::kv_chunk_bytes));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);

    __syncthreads();  // both warpgroups are done reading stage s
    if (threadIdx.x == 0 && t + k_stages < tiles) load_kv(t + k_stages);
  }

  // O / l, rounded to bf16; rows past seq (zero-filled queries) are not stored.
  __nv_bfloat16* o_head = a.o + head_offset(a, blockIdx.z, blockIdx.y, a.heads);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float row_l = l[h] + __shfl_xor_sync(0xffffffffu, l[h], 1);
    row_l += __shfl_xor_sync(0xffffffffu, row_l, 2);
    const int row = wg_row0 + 16 * warp + lane / 4 + 8 * h;
    if (row >= a.seq) continue;
    const float inv_l = 1.0f / row_l;
    __nv_bfloat16* dst = o_head + std::size_t(row) * D + lane % 4 * 2;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j) =
          __floats2bfloat162_rn(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
    }
  }
}

template <int D>
const void* kernel_ptr() {
  static const bool configured = [] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(flash_wgmma_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Tile<D>::smem_bytes));
    return true;
  }();
  (void)configured;
  return reinterpret_cast<const void*>(&flash_wgmma_kernel<D>);
}

int smem_bytes(int head_dim) {
  return head_dim == 64 ? Tile<64>::smem_bytes : head_dim == 128 ? Tile<128>::smem_bytes : Tile<256>::smem_bytes;
}

// The tensor maps hold the tensors' addresses and shapes: made in setup(), and made again should launch()
// ever see other ones.
class WgmmaTma {
 public:
  void setup(const Args& a, cudaStream_t) {
    require_head_dim(a.head_dim, k_name);
    const int bn = a.head_dim == 256 ? Tile<256>::BN : Tile<128>::BN;
    m_map_q = make_tensor_map_3d(a.q, a.batch * a.heads, a.seq, a.head_dim, BM);
    m_map_k = make_tensor_map_3d(a.k, a.batch * a.kv_heads, a.seq, a.head_dim, bn);
    m_map_v = make_tensor_map_3d(a.v, a.batch * a.kv_heads, a.seq, a.head_dim, bn);
    m_made_for = a;
  }

  void launch(const Args& a, cudaStream_t stream) {
    if (!same_tensors(a, m_made_for)) setup(a, stream);
    if (a.head_dim == 64) launch_d<64>(a, stream);
    if (a.head_dim == 128) launch_d<128>(a, stream);
    if (a.head_dim == 256) launch_d<256>(a, stream);
  }

  std::vector<Fact> facts(const Args& a) {
    require_head_dim(a.head_dim, k_name);
    const void* k = a.head_dim == 64 ? kernel_ptr<64>() : a.head_dim == 128 ? kernel_ptr<128>() : kernel_ptr<256>();
    return standard_facts(kernel_facts(k, k_threads, smem_bytes(a.head_dim)));
  }

 private:
  static constexpr const char* k_name = "ch18:flash_attention:04_wgmma_tma";

  static bool same_tensors(const Args& x, const Args& y) {
    return x.q == y.q && x.k == y.k && x.v == y.v && x.batch == y.batch && x.heads == y.heads &&
           x.kv_heads == y.kv_heads && x.seq == y.seq && x.head_dim == y.head_dim;
  }

  template <int D>
  void launch_d(const Args& a, cudaStream_t stream) {
    kernel_ptr<D>();
    const dim3 grid((a.seq + BM - 1) / BM, a.heads, a.batch);
    flash_wgmma_kernel<D><<<grid, k_threads, Tile<D>::smem_bytes, stream>>>(m_map_q, m_map_k, m_map_v, a);
    AISP_CHECK_LAUNCH();
  }

  CUtensorMap m_map_q{}, m_map_k{}, m_map_v{};
  Args m_made_for{};
};

AISP_REGISTER_STATEFUL_VARIANT(FlashAttentionProblem, WgmmaTma, .step = 4, .slug = "wgmma_tma",
                               .kind = VariantKind::step,
                               .summary = "wgmma S = QK^T (smem operands) and O += PV (P from registers, V "
                                          "MN-major), TMA Q once + 2-stage K/V ring, 2 warpgroups x 64 rows",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch18::flash_attention::v04
