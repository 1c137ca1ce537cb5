// ch18:flash_attention:05_warp_specialized — one warpgroup loads, two compute: producer and consumers
// meet only at full/empty mbarriers (sm_90a).
//
// What changed against 04: the block is three warpgroups. Warpgroup 0 is the producer: one of its
// threads loads Q once and then K/V tiles into the 2-stage ring as soon as a stage is empty, and the
// warpgroup gives registers back (setmaxnreg.dec to 24). Warpgroups 1 and 2 are the consumers, 64 query
// rows each, computing exactly 04's tile loop (wgmma S = Q K^T, softmax, wgmma O += P V from registers)
// with setmaxnreg.inc to 240 registers. A stage has two mbarriers: "full" (the producer's expect_tx,
// completed by the TMA bytes) and "empty" (one arrival per consumer warpgroup once its P V wgmma has
// retired). 04's block-wide __syncthreads per tile is gone: each consumer warpgroup runs at its own pace,
// so one warpgroup's softmax can overlap the other's GEMMs (by chance here; 06 schedules it on purpose),
// and a refill starts as soon as the slower consumer has released the stage rather than after both have
// met. (PTX ISA "setmaxnreg", "mbarrier".)
// Why it should help: the load of tile t + 2 no longer waits for a CTA barrier at the end of tile t, the
// issuing thread no longer computes, and setmaxnreg keeps the consumers at 240 registers although a third
// warpgroup is resident (384 threads would otherwise cap every thread at 168); the two consumers drift
// apart and fill each other's tensor-core gaps.
// Napkin math (head_dim 128): the same 8.4 MFLOP (~2048 clocks) and ~1500 clocks of softmax per 128 x 128
// tile as 04; if one consumer's softmax always ran under the other's GEMMs the tile would cost
// max(2048, 1500) clocks instead of their sum, up to ~1.7x over 04; realistically 5-20%, as nothing
// enforces it.
// Shared memory: as 04 (80 / 160 / 192 KiB for D = 64 / 128 / 256), plus 2 more barriers.
// Run: aisp bench run --targets ch18:flash_attention:05_warp_specialized
// PTX ISA: "wgmma.mma_async" (register-A form, imm-trans-b), "Matrix Descriptor Format", "Shared Memory
// Matrix Layout" (MN-major 128B swizzling), "cp.async.bulk.tensor", "mbarrier" (expect_tx, try_wait),
// "setmaxnreg".
#include <cuda_bf16.h>

#include "chapters/ch18_attention/flash_attention/hopper_attention.cuh"
#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v05 {

using namespace hopper_fa;

constexpr int BM = 128;  // query rows per block: 2 consumer warpgroups x 64
constexpr int k_threads = 384, k_stages = 2;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_producer_regs = 24, k_consumer_regs = 240;  // 128 x 24 + 256 x 240 <= 64 K registers
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
    flash_ws_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
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
  std::uint64_t* kv_empty = kv_full + k_stages;

  const int q0 = (a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;  // causal: longest first
  const int key_end = a.causal ? min(a.seq, q0 + BM) : a.seq;
  const int tiles = (key_end + BN - 1) / BN;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&kv_full[s], 1);
      mbar_init(&kv_empty[s], 2);  // one arrival per consumer warpgroup
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
      mbar_wait(&kv_empty[s], ((t / k_stages) & 1) ^ 1);  // the first round passes at once
      unsigned char* k_dst = kv_s + s * T::stage_bytes;
      mbar_arrive_expect_tx(&kv_full[s], T::stage_bytes);
#pragma unroll
      for (int c = 0; c < T::chunks; ++c) {
        tma_load_3d(k_dst + c * T::kv_chunk_bytes, &map_k, &kv_full[s], c * k_chunk_cols, t * BN, kv_plane);
        tma_load_3d(k_dst + T::kv_bytes + c * T::kv_chunk_bytes, &map_v, &kv_full[s], c * k_chunk_cols, t * BN,
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
    // This warpgroup's reads of stage s (K by the first GEMM, V by the second) have retired.
    if (threadIdx.x % 128 == 0) mbar_arrive(&kv_empty[s]);
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
    AISP_CUDA_CHECK(cudaFuncSetAttribute(flash_ws_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Tile<D>::smem_bytes));
    return true;
  }();
  (void)configured;
  return reinterpret_cast<const void*>(&flash_ws_kernel<D>);
}

int smem_bytes(int head_dim) {
  return head_dim == 64 ? Tile<64>::smem_bytes : head_dim == 128 ? Tile<128>::smem_bytes : Tile<256>::smem_bytes;
}

// The tensor maps hold the tensors' addresses and shapes: made in setup(), and made again should launch()
// ever see other ones.
class WarpSpecialized {
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
  static constexpr const char* k_name = "ch18:flash_attention:05_warp_specialized";

  static bool same_tensors(const Args& x, const Args& y) {
    return x.q == y.q && x.k == y.k && x.v == y.v && x.batch == y.batch && x.heads == y.heads &&
           x.kv_heads == y.kv_heads && x.seq == y.seq && x.head_dim == y.head_dim;
  }

  template <int D>
  void launch_d(const Args& a, cudaStream_t stream) {
    kernel_ptr<D>();
    const dim3 grid((a.seq + BM - 1) / BM, a.heads, a.batch);
    flash_ws_kernel<D><<<grid, k_threads, Tile<D>::smem_bytes, stream>>>(m_map_q, m_map_k, m_map_v, a);
    AISP_CHECK_LAUNCH();
  }

  CUtensorMap m_map_q{}, m_map_k{}, m_map_v{};
  Args m_made_for{};
};

AISP_REGISTER_STATEFUL_VARIANT(FlashAttentionProblem, WarpSpecialized, .step = 5, .slug = "warp_specialized",
                               .kind = VariantKind::step,
                               .summary = "TMA producer warpgroup (setmaxnreg 24) + 2 wgmma consumer warpgroups "
                                          "(240), full/empty mbarriers per K/V stage, no block barrier per tile",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch18::flash_attention::v05
