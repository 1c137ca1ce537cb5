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
// The tile primitives (swizzle, fragments, mask, online softmax, P V) are in mma_sync_tile.cuh, which
// the serving engine's prefill attention shares; this file holds what is particular to dense heads.
#include <cuda_bf16.h>

#include "chapters/ch18_attention/flash_attention/mma_sync_tile.cuh"
#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v03 {

using namespace mma_tile;  // BR, BC, Smem, swizzled, scores, apply_mask, online_softmax, accumulate_pv, ...

// ROWS rows of a [seq][D] head starting at row0 into shared memory; rows past seq are zero-filled, so
// masked keys multiply zeros, not garbage.
template <int D, int ROWS>
__device__ inline void load_tile_async(unsigned smem, const __nv_bfloat16* head, int row0, int seq) {
  for (int p = threadIdx.x; p < ROWS * D / 8; p += k_threads) {
    const int row = p / (D / 8), piece = p % (D / 8);
    const bool inside = row0 + row < seq;
    const __nv_bfloat16* src = head + (inside ? std::size_t(row0) + row : 0) * D + piece * 8;
    cp_async16(swizzled<D>(smem, row, piece), src, inside);
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
    const float row_l = row_sum(l[h]);
    const int row = q0 + warp * 16 + lane / 4 + h * 8;
    if (row >= a.seq) continue;
    store_row<D>(o_head + std::size_t(row) * D + lane % 4 * 2, o, h, 1.0f / row_l);
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
