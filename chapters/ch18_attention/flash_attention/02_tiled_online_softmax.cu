// ch18:flash_attention:02_tiled_online_softmax — one kernel, scores never leave the SM (CUDA cores).
//
// What changed: the three launches of step 01 become one kernel, FlashAttention's algorithm on CUDA
// cores. A block owns BR = 64 query rows of one head; it walks the keys in tiles of BC = 64: the K and V
// tile are staged in shared memory (as fp32, K transposed), each thread computes a 4 x 4 block of the
// 64 x 64 score tile in registers, and the online softmax keeps per row a running max m and sum l:
// when a tile raises the max, the accumulated output and l are rescaled by exp(m_old - m_new) before the
// tile's P V is added. O is divided by l once at the end. Everything is fp32 (P is not rounded: there
// are no tensor cores to feed). Tiles past the diagonal are skipped under the causal mask, and causal
// blocks run longest-first (the last query tile has the most keys).
// Why it should help: DRAM traffic drops from step 01's ~26 GB to Q, K, V and O (0.5 GB plus K/V
// re-reads from L2), so the kernel is no longer memory-bound.
// Why it may not: the FLOPs now run on FP32 FMA units instead of tensor cores. Napkin math: 1.1 TFLOP at
// an H100/H200's FP32 peak (132 SMs x 128 lanes x 2 x ~1.9 GHz ~ 64 TFLOP/s) is 17 ms at best, and a
// shared-memory-fed FMA loop reaches perhaps half of it: ~35 ms, several times slower than step 01.
// The lesson of this step is that fusion alone does not win; the scores must also be computed by the
// tensor cores (step 03).
// Run: aisp bench run --targets ch18:flash_attention:02_tiled_online_softmax
#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch18::flash_attention::v02 {

constexpr int BR = 64, BC = 64;  // query rows per block, keys per tile
constexpr int k_threads = 256;   // 16 x 16: thread (ty, tx) owns rows 4ty..4ty+3 of the tile
constexpr int TR = 4;            // rows per thread (and keys per thread in the score tile)
constexpr float k_log2e = 1.4426950408889634f;

// Shared memory, fp32: Q^T [D][BR], K^T [D][BC], V [BC][D], P^T [BC][BR] (swizzled, see p_slot).
template <int D>
constexpr int k_smem = (D * BR + D * BC + BC * D + BC * BR) * 4;  // 64 / 112 / 208 KiB for D 64 / 128 / 256

// P^T is written by the 16 threads of a row group at keys 4tx + c: unswizzled, their float4 stores would
// all hit one bank group. Chunk (4 rows) `chunk` of key `key` goes to chunk ^ (key / 4): a warp's
// stores spread over all 8 bank groups, and a read of one key's chunk stays a broadcast.
__device__ inline int p_slot(int key, int chunk) { return key * BR + 4 * (chunk ^ (key / 4 % (BR / 4))); }

// Rows row0.. of a [seq][D] bf16 head into dst[c * ROWS + row] (fp32, transposed); rows past seq are 0.
// A warp covers 32 consecutive rows with the same 8 columns: its shared stores are conflict-free.
template <int D, int ROWS>
__device__ void load_transposed(float* dst, const __nv_bfloat16* head, int row0, int seq) {
  for (int p = threadIdx.x; p < ROWS * D / 8; p += k_threads) {
    const int row = p % ROWS, col = p / ROWS * 8;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (row0 + row < seq) raw = *reinterpret_cast<const uint4*>(head + (std::size_t(row0) + row) * D + col);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(&raw);
    for (int e = 0; e < 8; ++e) dst[(col + e) * ROWS + row] = __bfloat162float(v[e]);
  }
}

// V rows k0.. into dst[row * D + c] (fp32, row-major); rows past seq are 0 (P is 0 there, but 0 * NaN
// of uninitialised memory would not be).
template <int D>
__device__ void load_rows(float* dst, const __nv_bfloat16* head, int k0, int seq) {
  for (int p = threadIdx.x; p < BC * D / 8; p += k_threads) {
    const int row = p / (D / 8), col = p % (D / 8) * 8;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (k0 + row < seq) raw = *reinterpret_cast<const uint4*>(head + (std::size_t(k0) + row) * D + col);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(&raw);
    for (int e = 0; e < 8; ++e) dst[row * D + col + e] = __bfloat162float(v[e]);
  }
}

// Max and sum over the 16 threads (tx) that share a row: lanes 0-15 and 16-31 of a warp are two rows.
__device__ inline float row_max(float v) {
  for (int off = 8; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ inline float row_sum(float v) {
  for (int off = 8; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <int D>
__global__ void __launch_bounds__(k_threads) attention_tiled_kernel(Args a) {
  extern __shared__ float4 smem4[];
  float* q_t = reinterpret_cast<float*>(smem4);
  float* k_t = q_t + D * BR;
  float* v_s = k_t + D * BC;
  float* p_t = v_s + BC * D;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int q0 = (a.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;  // causal: longest first
  const __nv_bfloat16* k_head = a.k + head_offset(a, blockIdx.z, kv_head_of(a, blockIdx.y), a.kv_heads);
  const __nv_bfloat16* v_head = a.v + head_offset(a, blockIdx.z, kv_head_of(a, blockIdx.y), a.kv_heads);
  load_transposed<D, BR>(q_t, a.q + head_offset(a, blockIdx.z, blockIdx.y, a.heads), q0, a.seq);

  // Scores live in the log2 domain: exp(x * scale) = exp2(x * scale * log2(e)).
  const float scale_log2 = a.scale * k_log2e;
  float o[TR][D / 16] = {}, m[TR], l[TR];
  for (int r = 0; r < TR; ++r) m[r] = -INFINITY, l[r] = 0.0f;
  const int key_end = a.causal ? min(a.seq, q0 + BR) : a.seq;  // keys past the tile's last row: masked
  for (int k0 = 0; k0 < key_end; k0 += BC) {
    __syncthreads();  // the previous tile's K, V and P are no longer read
    load_transposed<D, BC>(k_t, k_head, k0, a.seq);
    load_rows<D>(v_s, v_head, k0, a.seq);
    __syncthreads();

    float s[TR][TR] = {};
#pragma unroll 8
    for (int c = 0; c < D; ++c) {
      const float4 qa = *reinterpret_cast<const float4*>(&q_t[c * BR + TR * ty]);
      const float4 kb = *reinterpret_cast<const float4*>(&k_t[c * BC + TR * tx]);
      const float qv[TR] = {qa.x, qa.y, qa.z, qa.w}, kv[TR] = {kb.x, kb.y, kb.z, kb.w};
      for (int r = 0; r < TR; ++r)
        for (int e = 0; e < TR; ++e) s[r][e] = fmaf(qv[r], kv[e], s[r][e]);
    }

    float p[TR][TR];
    for (int r = 0; r < TR; ++r) {
      const int row = q0 + TR * ty + r;
      float tile_max = -INFINITY;
      for (int e = 0; e < TR; ++e) {
        const int key = k0 + TR * tx + e;
        const bool masked = key >= a.seq || (a.causal && key > row);
        s[r][e] = masked ? -INFINITY : s[r][e] * scale_log2;
        tile_max = fmaxf(tile_max, s[r][e]);
      }
      const float m_new = fmaxf(m[r], row_max(tile_max));
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: keep it empty
      const float alpha = exp2f(m[r] - base);
      float sum = 0.0f;
      for (int e = 0; e < TR; ++e) {
        p[r][e] = exp2f(s[r][e] - base);  // masked: exp2(-inf) = 0
        sum += p[r][e];
      }
      l[r] = l[r] * alpha + row_sum(sum);
      m[r] = m_new;
      for (int c = 0; c < D / 16; ++c) o[r][c] *= alpha;
    }
    for (int e = 0; e < TR; ++e) {
      *reinterpret_cast<float4*>(&p_t[p_slot(TR * tx + e, ty)]) =
          make_float4(p[0][e], p[1][e], p[2][e], p[3][e]);
    }
    __syncthreads();

    // O[rows][cols] += P[rows][key] * V[key][cols]; the thread's columns are g * 64 + 4tx + 0..3.
#pragma unroll 4
    for (int key = 0; key < BC; ++key) {
      const float4 pk = *reinterpret_cast<const float4*>(&p_t[p_slot(key, ty)]);
      const float pr[TR] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
      for (int g = 0; g < D / 64; ++g) {
        const float4 vv = *reinterpret_cast<const float4*>(&v_s[key * D + g * 64 + TR * tx]);
        for (int r = 0; r < TR; ++r) {
          o[r][4 * g + 0] = fmaf(pr[r], vv.x, o[r][4 * g + 0]);
          o[r][4 * g + 1] = fmaf(pr[r], vv.y, o[r][4 * g + 1]);
          o[r][4 * g + 2] = fmaf(pr[r], vv.z, o[r][4 * g + 2]);
          o[r][4 * g + 3] = fmaf(pr[r], vv.w, o[r][4 * g + 3]);
        }
      }
    }
  }

  __nv_bfloat16* o_head = a.o + head_offset(a, blockIdx.z, blockIdx.y, a.heads);
  for (int r = 0; r < TR; ++r) {
    const int row = q0 + TR * ty + r;
    if (row >= a.seq) continue;
    const float inv_l = 1.0f / l[r];
    for (int g = 0; g < D / 64; ++g) {
      __nv_bfloat162* dst =
          reinterpret_cast<__nv_bfloat162*>(o_head + std::size_t(row) * D + g * 64 + TR * tx);
      dst[0] = __floats2bfloat162_rn(o[r][4 * g] * inv_l, o[r][4 * g + 1] * inv_l);
      dst[1] = __floats2bfloat162_rn(o[r][4 * g + 2] * inv_l, o[r][4 * g + 3] * inv_l);
    }
  }
}

template <int D>
const void* kernel_ptr() {
  static const bool configured = [] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(attention_tiled_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem<D>));
    return true;
  }();
  (void)configured;
  return reinterpret_cast<const void*>(&attention_tiled_kernel<D>);
}

template <int D>
void launch_d(const Args& a, cudaStream_t stream) {
  kernel_ptr<D>();
  const dim3 grid((a.seq + BR - 1) / BR, a.heads, a.batch);
  attention_tiled_kernel<D><<<grid, k_threads, k_smem<D>, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

void launch(const Args& a, cudaStream_t stream) {
  require_head_dim(a.head_dim, "ch18:flash_attention:02_tiled_online_softmax");
  if (a.head_dim == 64) launch_d<64>(a, stream);
  if (a.head_dim == 128) launch_d<128>(a, stream);
  if (a.head_dim == 256) launch_d<256>(a, stream);
}

std::vector<Fact> facts(const Args& a) {
  require_head_dim(a.head_dim, "ch18:flash_attention:02_tiled_online_softmax");
  const void* k = a.head_dim == 64    ? kernel_ptr<64>()
                  : a.head_dim == 128 ? kernel_ptr<128>()
                                      : kernel_ptr<256>();
  const int smem = a.head_dim == 64 ? k_smem<64> : a.head_dim == 128 ? k_smem<128> : k_smem<256>;
  return standard_facts(kernel_facts(k, k_threads, smem));
}

AISP_REGISTER_VARIANT_WITH_FACTS(FlashAttentionProblem, launch, facts, .step = 2,
                                 .slug = "tiled_online_softmax", .kind = VariantKind::step,
                                 .summary =
                                     "one kernel: 64-row Q tile, K/V tiles through smem, online "
                                     "softmax, all fp32 on CUDA cores");

}  // namespace aisp::ch18::flash_attention::v02
