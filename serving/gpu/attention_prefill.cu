// Prefill attention (a chunk of n_new > 1 query tokens per sequence) over the paged cache, on the tensor
// cores: the design of ch18:flash_attention:03_mma_sync (FlashAttention-2, mma.sync m16n8k16, ldmatrix,
// P kept in registers, K/V double-buffered by cp.async) with three changes for the engine:
// - a block is one (sequence, 64-query tile) of the host's tile list x one query head, so a ragged batch
//   is one launch and no query row of another sequence is computed;
// - K and V tiles are gathered through the block table: key j is slot j % block_size of page
//   table[j / block_size] (a 64-key tile spans 64 / block_size pages, each row 16-byte aligned);
// - the causal mask is offset: the chunk's query i sits at position start + i and sees keys 0..start + i,
//   the cached prefix included.
// Each warp owns 16 query rows; every tile's scores, online softmax and P V stay in registers, computed
// by step 03's own tile functions (chapters/ch18_attention/flash_attention/mma_sync_tile.cuh); only the
// loads through the block table, the offset causal mask's arguments and the output rows are this file's.
// Shared memory: Q 64 x D + 2 stages of K and V tiles: 40 KiB (D = 64), 80 KiB (D = 128).
#include <cuda_bf16.h>

#include <cstdint>

#include "chapters/ch18_attention/flash_attention/mma_sync_tile.cuh"
#include "device/cuda_check.hpp"
#include "serving/gpu/attention.hpp"
#include "serving/gpu/current_device.hpp"

namespace aisp::serving::gpu {
namespace {

using namespace ch18::flash_attention::mma_tile;  // BR, BC, Smem, swizzled, scores, online_softmax, ...
static_assert(k_prefill_tile_rows == BR, "the host's tile list cuts chunks into step 03's query tiles");

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
      apply_mask(s, key0, warp_pos0, lane, key_end, /*causal=*/true);
    }
    online_softmax<D>(s, m, l, o, scale_log2);
    accumulate_pv<D>(o, s, v_s, lane);
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float row_l = row_sum(l[h]);
    const int row = warp * 16 + lane / 4 + h * 8;
    if (row >= rows) continue;
    const float inv_l = 1.0f / row_l;
    __nv_bfloat16* dst = a.out + static_cast<std::int64_t>(token0 + q0 + row) * a.heads * D +
                         static_cast<std::int64_t>(head) * D + lane % 4 * 2;
    store_row<D>(dst, o, h, inv_l);
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
