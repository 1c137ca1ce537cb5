// ch18:flash_attention:08_fast_exp — step 07 with the softmax's exponentials as one flush-to-zero
// ex2.approx.ftz.f32 each (sm_90a).
//
// What changed against 07: exp2f(x) became ex2_ftz(x), the PTX instruction ex2.approx.ftz.f32 alone.
// Without -use_fast_math, exp2f compiles to ex2.approx.f32, whose handling of denormal inputs and results
// (PTX ISA "ex2": the non-ftz form must produce and accept subnormals, which the MUFU unit does not)
// costs a compare and two predicated multiplies around every MUFU.EX2. The softmax here never needs a
// subnormal: its arguments are s - m <= 0 and a result below 2^-126 (a key weighing less than 1e-38 of the
// row's maximum) is a zero weight either way, so flushing changes no output beyond the gate's tolerance
// (exp2(-inf) is still +0: the masked keys keep weighing nothing).
// Why it should help: the softmax is what the ping-pong and the overlap hide, and at head_dim 64 and 128
// it is longer than the GEMMs beside it (07's napkin math: ~750 clocks of softmax against ~1024 of GEMMs
// per warpgroup and tile at head_dim 128). Three fewer instructions per score out of ~7 shortens it by a
// third.
// Napkin math (head_dim 128, per warpgroup and 128-key tile): 64 x 128 scores / 128 threads = 64 scores
// per thread, ~3 instructions each removed: ~200 issue slots of ~750. A probe on one H100 measured 94.9% of
// cuDNN at head_dim 128 (07: 90.0%), 80.8% at 64, 90.8% at 256.
// Shared memory: as 07 (80 / 160 / 192 KiB for D = 64 / 128 / 256).
// Run: aisp bench run --targets ch18:flash_attention:08_fast_exp
// PTX ISA: "ex2" (.approx.ftz), "wgmma.mma_async" (register-A form, imm-trans-b), "wgmma.wait_group",
// "Matrix Descriptor Format", "Shared Memory Matrix Layout" (MN-major 128B swizzling),
// "cp.async.bulk.tensor", "mbarrier" (expect_tx, try_wait), "setmaxnreg", "bar, barrier".
#include <cuda_bf16.h>

#include "chapters/ch18_attention/flash_attention/hopper_attention.cuh"
#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v08 {

using namespace hopper_fa;

constexpr int BM = 128;  // query rows per block: 2 consumer warpgroups x 64
constexpr int k_threads = 384, k_stages = 2;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_producer_regs = 24, k_consumer_regs = 240;  // 128 x 24 + 256 x 240 <= 64 K registers
constexpr float k_log2e = 1.4426950408889634f;
// Named barriers 1 and 2 (0 is __syncthreads'): consumer warpgroup w may issue its GEMMs once barrier
// k_turn_barrier + w has seen its 128 threads and the other warpgroup's 128.
constexpr int k_turn_barrier = 1, k_turn_threads = 256;

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
// p = exp2(s * scale_log2 - m_new) and the thread's partial l is rescaled; O is not touched (a P V may
// still be accumulating into it): its factor exp2(m_old - m_new) is returned in alpha.
// 2^x by the MUFU unit with subnormals flushed to zero (PTX ISA "ex2"): one instruction, where exp2f is
// ex2.approx.f32 plus the fix-ups that keep subnormals (see the header).
__device__ inline float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
template <int BN>
__device__ inline void online_softmax(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
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
    alpha[h] = ex2_ftz(m[h] - base);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      s[4 * j + 2 * h] = ex2_ftz(fmaf(s[4 * j + 2 * h], scale_log2, -base));
      s[4 * j + 2 * h + 1] = ex2_ftz(fmaf(s[4 * j + 2 * h + 1], scale_log2, -base));
      sum += s[4 * j + 2 * h] + s[4 * j + 2 * h + 1];
    }
    l[h] = l[h] * alpha[h] + sum;
    m[h] = m_new;
  }
}

template <int D>
__device__ inline void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * j + e] *= alpha[e / 2];
  }
}

// S = Q K^T: K step kk is head_dim columns 16kk.., chunk kk / 4, +32 bytes per 16 columns in the row.
template <int D, int BN>
__device__ inline void issue_qk(float (&sc)[BN / 2], const unsigned char* q_wg, const unsigned char* k_t) {
  using T = Tile<D>;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = kk / 4, byte = kk % 4 * 32;
    wgmma_ss<BN>(sc, smem_desc(q_wg + c * T::q_chunk_bytes + byte), smem_desc(k_t + c * T::kv_chunk_bytes + byte),
                 kk > 0);
  }
}

// O += P V: K step kk is keys 16kk..16kk+15 = two 8-key atoms of every V chunk, 16 x 128 B further.
template <int D, int BN>
__device__ inline void issue_pv(float (&o)[D / 2], const unsigned (&p)[BN / 4], const unsigned char* v_t) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const unsigned pa[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    wgmma_rs<D>(o, pa, smem_desc_mn_major(v_t + kk * 16 * k_chunk_row_bytes, Tile<D>::kv_chunk_bytes));
  }
}

// Tile t's scores to probabilities (in place): the mask where the tile needs it, then the online softmax.
template <int BN>
__device__ inline void softmax_tile(float (&sc)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2], int t,
                                    int wg_row0, int warp, int lane, const Args& a, float scale_log2) {
  const int k0 = t * BN;
  if (k0 + BN > a.seq || (a.causal && k0 + BN - 1 > wg_row0)) {  // warpgroup-uniform: most tiles skip it
    apply_mask<BN>(sc, k0, wg_row0 + 16 * warp, lane, a.seq, a.causal);
  }
  online_softmax<BN>(sc, m, l, alpha, scale_log2);
}

// P as the A operand: A register i of K step kk is (rows l/4 | l/4 + 8, keys 16kk + 8(i/2) + 2(l%4), +1) =
// accumulator entries 8kk + 2i, +1: the packed pairs in order.
template <int BN>
__device__ inline void pack_p(const float (&sc)[BN / 2], unsigned (&p)[BN / 4]) {
#pragma unroll
  for (int i = 0; i < BN / 4; ++i) p[i] = pack_bf16(sc[2 * i], sc[2 * i + 1]);
}

template <int D>
__global__ void __launch_bounds__(k_threads, 1)
    flash_overlap_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
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
  std::uint64_t* k_full = q_full + 1;  // k_stages each: K landed, V landed, K read by both, V read by both
  std::uint64_t* v_full = k_full + k_stages;
  std::uint64_t* k_empty = v_full + k_stages;
  std::uint64_t* v_empty = k_empty + k_stages;

  const int q0 = (a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;  // causal: longest first
  const int key_end = a.causal ? min(a.seq, q0 + BM) : a.seq;
  const int tiles = (key_end + BN - 1) / BN;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], 1);
      mbar_init(&k_empty[s], 2);  // one arrival per consumer warpgroup
      mbar_init(&v_empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them; the last block-wide barrier

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    setmaxnreg_dec<k_producer_regs>();
    if (threadIdx.x != 0) return;
    const int q_plane = blockIdx.z * a.heads + blockIdx.y;  // planes of the 3-D maps
    const int kv_plane = blockIdx.z * a.kv_heads + kv_head_of(a, blockIdx.y);
    mbar_arrive_expect_tx(q_full, T::q_bytes);
#pragma unroll
    for (int c = 0; c < T::chunks; ++c) {
      tma_load_3d(q_s + c * T::q_chunk_bytes, &map_q, q_full, c * k_chunk_cols, q0, q_plane);
    }
    for (int t = 0; t < tiles; ++t) {
      const int s = t % k_stages;
      const unsigned parity = ((t / k_stages) & 1) ^ 1;  // the first round passes at once
      unsigned char* k_dst = kv_s + s * T::stage_bytes;
      mbar_wait(&k_empty[s], parity);
      mbar_arrive_expect_tx(&k_full[s], T::kv_bytes);
#pragma unroll
      for (int c = 0; c < T::chunks; ++c) {
        tma_load_3d(k_dst + c * T::kv_chunk_bytes, &map_k, &k_full[s], c * k_chunk_cols, t * BN, kv_plane);
      }
      mbar_wait(&v_empty[s], parity);
      mbar_arrive_expect_tx(&v_full[s], T::kv_bytes);
#pragma unroll
      for (int c = 0; c < T::chunks; ++c) {
        tma_load_3d(k_dst + T::kv_bytes + c * T::kv_chunk_bytes, &map_v, &v_full[s], c * k_chunk_cols, t * BN,
                    kv_plane);
      }
    }
    return;
  }

  setmaxnreg_inc<k_consumer_regs>();
  const int cw = warpgroup - 1, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int wg_row0 = q0 + 64 * cw;
  const unsigned char* q_wg = q_s + cw * 64 * k_chunk_row_bytes;  // this warpgroup's 64 rows of each chunk
  const float scale_log2 = a.scale * k_log2e;
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;

  const int my_turn = k_turn_barrier + cw, their_turn = k_turn_barrier + 1 - cw;
  auto k_tile = [&](int t) { return kv_s + t % k_stages * T::stage_bytes; };
  auto v_tile = [&](int t) { return kv_s + t % k_stages * T::stage_bytes + T::kv_bytes; };
  auto release = [&](std::uint64_t* empty, int t) {
    if (threadIdx.x % 128 == 0) mbar_arrive(&empty[t % k_stages]);  // this warpgroup's reads have retired
  };
  float sc[BN / 2], alpha[2];
  unsigned p[BN / 4];

  if (cw == 1) named_barrier_arrive(k_turn_barrier, k_turn_threads);  // WG1 takes the first turn
  mbar_wait(q_full, 0);
  // S(0) alone: its block has no P V after it.
  mbar_wait(&k_full[0], 0);
  named_barrier_sync(my_turn, k_turn_threads);
  wgmma_fence();
  issue_qk<D, BN>(sc, q_wg, k_tile(0));
  wgmma_commit();
  named_barrier_arrive(their_turn, k_turn_threads);
  wgmma_wait<0>();
  fence_regs(sc);
  release(k_empty, 0);
  softmax_tile<BN>(sc, m, l, alpha, 0, wg_row0, warp, lane, a, scale_log2);  // alpha 0: O is still zero
  pack_p<BN>(sc, p);

  for (int t = 1; t < tiles; ++t) {
    mbar_wait(&k_full[t % k_stages], (t / k_stages) & 1);
    mbar_wait(&v_full[(t - 1) % k_stages], ((t - 1) / k_stages) & 1);
    named_barrier_sync(my_turn, k_turn_threads);  // the other warpgroup has issued its block
    fence_regs(o);
    fence_regs(p);
    wgmma_fence();
    issue_qk<D, BN>(sc, q_wg, k_tile(t));  // first: the softmax below waits for this group only
    wgmma_commit();
    issue_pv<D, BN>(o, p, v_tile(t - 1));  // O already in P(t-1)'s scale
    wgmma_commit();
    named_barrier_arrive(their_turn, k_turn_threads);
    wgmma_wait<1>();  // S(t) has landed; P(t-1) V(t-1) may still be running
    fence_regs(sc);
    release(k_empty, t);
    softmax_tile<BN>(sc, m, l, alpha, t, wg_row0, warp, lane, a, scale_log2);  // under P(t-1) V(t-1)
    wgmma_wait<0>();  // P(t-1) V(t-1) retired: O is readable and p's registers may be overwritten
    fence_regs(o);
    fence_regs(p);
    release(v_empty, t - 1);
    rescale_o<D>(o, alpha);  // to P(t)'s scale, before the turn: this warpgroup would wait for it anyway
    pack_p<BN>(sc, p);
  }

  // The last P V, in turn too; WG1's arrival lets WG2 issue its own last block.
  mbar_wait(&v_full[(tiles - 1) % k_stages], ((tiles - 1) / k_stages) & 1);
  named_barrier_sync(my_turn, k_turn_threads);
  fence_regs(o);
  fence_regs(p);
  wgmma_fence();
  issue_pv<D, BN>(o, p, v_tile(tiles - 1));
  wgmma_commit();
  if (cw == 0) named_barrier_arrive(their_turn, k_turn_threads);
  wgmma_wait<0>();
  fence_regs(o);

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
    AISP_CUDA_CHECK(cudaFuncSetAttribute(flash_overlap_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Tile<D>::smem_bytes));
    return true;
  }();
  (void)configured;
  return reinterpret_cast<const void*>(&flash_overlap_kernel<D>);
}

int smem_bytes(int head_dim) {
  return head_dim == 64 ? Tile<64>::smem_bytes : head_dim == 128 ? Tile<128>::smem_bytes : Tile<256>::smem_bytes;
}

// The tensor maps hold the tensors' addresses and shapes: made in setup(), and made again should launch()
// ever see other ones.
class FastExp {
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
  static constexpr const char* k_name = "ch18:flash_attention:08_fast_exp";

  static bool same_tensors(const Args& x, const Args& y) {
    return x.q == y.q && x.k == y.k && x.v == y.v && x.batch == y.batch && x.heads == y.heads &&
           x.kv_heads == y.kv_heads && x.seq == y.seq && x.head_dim == y.head_dim;
  }

  template <int D>
  void launch_d(const Args& a, cudaStream_t stream) {
    kernel_ptr<D>();
    const dim3 grid((a.seq + BM - 1) / BM, a.heads, a.batch);
    flash_overlap_kernel<D><<<grid, k_threads, Tile<D>::smem_bytes, stream>>>(m_map_q, m_map_k, m_map_v, a);
    AISP_CHECK_LAUNCH();
  }

  CUtensorMap m_map_q{}, m_map_k{}, m_map_v{};
  Args m_made_for{};
};

AISP_REGISTER_STATEFUL_VARIANT(FlashAttentionProblem, FastExp, .step = 8,
                               .slug = "fast_exp", .kind = VariantKind::optimized,
                               .summary = "07 with the softmax exponentials as ex2.approx.ftz.f32 (no subnormal fix-ups)",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch18::flash_attention::v08
