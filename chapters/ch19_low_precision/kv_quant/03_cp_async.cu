// ch19:kv_quant:03_cp_async — step 02 fed from shared memory: cp.async keeps each warp's next tiles in
// flight while it computes the current one, so the bytes in flight no longer cost registers.
//
// What changed: in step 02 a warp loads a tile's 4 K and 4 V vectors per lane into registers, waits for
// them, computes, and only then loads the next tile: its 4 KiB are in flight only while it waits, and
// the 8 uint4 staging registers add to the FP8 run's 225 (the lane holds 16 dims of 4 queries and 4
// accumulators), which leaves 2 blocks (8 warps) per SM at FP8 against 4 (16 warps) at bf16. Here each
// warp copies its tiles with 16-byte `cp.async.cg.shared.global` (zero-filled with src-size 0 for rows
// past the split) into its own ring of 3 stages in shared memory, two tiles ahead of the one it
// computes: `cp.async.wait_group 2` waits for the current tile only. A lane reads back only the
// vectors it copied itself (vector 32 i + lane of a stage is step 02's row row0 + rows_per_load i,
// column col), so no barrier is needed inside a warp (a __syncwarp marks where a stage is free again).
// The geometry, the tile, the math and its order of operations, the split plan and the merge kernel are
// step 02's, for both formats: the bf16 run gets the same pipeline, so the cache_bits sweep still
// compares one kernel at two formats. Registers (ptxas, nvcc 13, sm_90a, no spills): 127 at bf16 (4
// blocks per SM, as in step 02), 218 at FP8 (2 blocks, as in step 02: the lane's q and accumulators are
// 128 of them; what changes is what those 8 warps keep in flight).
// Why it helps: step 02 at bf16 reaches 95.4% / 98.0% of the DRAM read ceiling at contexts 16384 /
// 32768, at FP8 only 70.6% / 74.2% (H100, run at 2e28651+): the FP8 run has half the warps, each with
// the same 4 KiB in flight, for bytes that arrive at the same rate. cp.async moves global memory to
// shared memory without registers, so bytes in flight now scale with the stages, not the warps.
// Napkin math (not measured): Little's law at ~3.35 TB/s (H100 SXM datasheet) and an assumed ~1 us
// loaded DRAM latency asks ~25 KB in flight per SM (132 SMs). Step 02 has at most 8 warps x 4 KiB =
// 32 KiB at FP8, and less on average (none while a warp computes); here 8 warps x 2 tiles x 4 KiB =
// 64 KiB at FP8 (128 KiB at bf16), in flight while the warps compute. Shared memory: 4 warps x 3 stages
// x 4 KiB = 48 KiB per block, reused for the warp merge: 96 KiB per SM at FP8 (2 blocks), 192 KiB at
// bf16 (4 blocks) of the H100's 228 KiB. The instructions per byte are step 02's (~60% of the issue
// slots at FP8, per 02's napkin math), plus one cp.async and one shared load per 16 bytes. Expect the
// FP8 run >= 85% of the DRAM read ceiling at long contexts, i.e. >= 1.7x over the bf16 run (which has
// little left to gain), up from 02's 1.48x / 1.52x.
// Run: aisp bench run --targets ch19:kv_quant:03_cp_async
// PTX ISA: "Data Movement and Conversion Instructions: cp.async" (src-size < cp-size zero-fills the
// rest), "cp.async.commit_group", "cp.async.wait_group".
#include <cuda_fp16.h>

#include <algorithm>

#include "chapters/ch19_low_precision/kv_quant/problem.hpp"
#include "chapters/ch19_low_precision/kv_quant/split_merge.cuh"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::kv_quant::v03 {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int k_stages = 3;  // per warp: the tile being computed and two in flight
constexpr int G = k_group;
constexpr unsigned k_full_mask = 0xffffffffu;

// Step 02's geometry: how a warp covers rows of head_dim values with 16-byte vectors of element type T.
template <class T>
struct Geometry {
  static constexpr int vec = 16 / static_cast<int>(sizeof(T));     // 8 (bf16) or 16 (FP8) values
  static constexpr int lanes_per_row = k_head_dim / vec;           // 16 or 8
  static constexpr int rows_per_load = 32 / lanes_per_row;         // 2 or 4 rows per warp-wide load
  static constexpr int loads = 4;                                  // vectors of K (and of V) per lane
  static constexpr int tile_rows = rows_per_load * loads;          // 8 or 16 rows per warp per tile
  static constexpr int stage_vecs = 2 * 32 * loads;                // K then V: 4 KiB per warp and stage
  static_assert(k_head_dim % vec == 0 && 32 % lanes_per_row == 0, "a row must be whole vectors");
};

// Shared memory per block: the warps' stages; after the loop the same bytes hold the warps' accumulators.
template <class T>
constexpr std::size_t smem_bytes() {
  return std::max(sizeof(uint4) * k_warps * k_stages * Geometry<T>::stage_vecs,
                  sizeof(float) * k_warps * G * k_head_dim);
}

// Blocks per SM asked of ptxas (registers <= 65536 / (128 x this)). bf16: 4, as step 02 had (without it
// ptxas takes 144 registers here, 3 blocks). FP8: 2, what its 224 registers give; asking for 3 (168
// registers) spills ~100 bytes per thread, q and the accumulators alone being 128 registers.
template <class T>
constexpr int k_min_blocks = is_fp8<T> ? 2 : 4;

template <int V>
struct WarpState {
  float m[G];
  float l[G] = {};
  float acc[G][V] = {};
  __device__ WarpState() {
#pragma unroll
    for (int g = 0; g < G; ++g) m[g] = -INFINITY;
  }
};

// A vector of 8 bf16 as floats (bf16 -> f32 is a shift: exact).
__device__ void to_float(uint4 raw, float (&f)[8]) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    static_assert(sizeof(pair) == sizeof(unsigned));
    memcpy(&pair, &w[i], sizeof(pair));
    const float2 x = __bfloat1622float2(pair);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// A vector of 16 e4m3 codes as their (unscaled) values: two codes per cvt.rn.f16x2.e4m3x2, the lower
// byte into the lower half (element order is memory order), then each half widened to f32. Exact.
__device__ void to_float(uint4 raw, float (&f)[16]) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const auto codes = static_cast<__nv_fp8x2_storage_t>(w[i] >> (16 * h));
      const __half2 pair(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3));
      const float2 x = __half22float2(pair);
      f[4 * i + 2 * h] = x.x;
      f[4 * i + 2 * h + 1] = x.y;
    }
  }
}

template <int from, int to>
__device__ float xor_sum(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}
template <int from, int to>
__device__ float xor_max(float v) {
#pragma unroll
  for (int offset = from; offset < to; offset *= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

// 16 bytes global -> shared without registers (.cg: cached in L2 only, the bytes are used once).
// src_size 0 reads nothing and writes 16 zeros; the caller still passes an address inside the cache.
__device__ void cp_async16(uint4* dst, const uint4* src, bool valid) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int n>
__device__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}

// Step 02's attend_tile, reading the tile from the lane's own vectors of a stage: ks[32 i + lane] is
// row row0 + rows_per_load i, column col, zero where that row is past `valid` (>= 1) — zeros, never
// stale bytes, so that a weight of 0 never meets a NaN (0x7f is an e4m3 NaN).
template <class T>
__device__ void attend_tile(const uint4* ks, const uint4* vs, int valid,
                            const float (&q)[G][Geometry<T>::vec], float k_scale, float v_scale,
                            int row0, int lane, WarpState<Geometry<T>::vec>& st) {
  using Geo = Geometry<T>;
  float s[Geo::loads][G];
#pragma unroll
  for (int i = 0; i < Geo::loads; ++i) {
    float kf[Geo::vec];
    to_float(ks[32 * i + lane], kf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) dot = fmaf(q[g][j], kf[j], dot);
      if constexpr (is_fp8<T>) dot *= k_scale;  // once per 16-element chunk
      const float sum = xor_sum<1, Geo::lanes_per_row>(dot);  // every lane shuffles, valid row or not
      s[i][g] = row0 + Geo::rows_per_load * i < valid ? sum : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float m_tile = -INFINITY;
#pragma unroll
    for (int i = 0; i < Geo::loads; ++i) m_tile = fmaxf(m_tile, s[i][g]);
    const float m_new = fmaxf(st.m[g], xor_max<Geo::lanes_per_row, 32>(m_tile));  // finite: row 0 is valid
    const float alpha = exp2f(st.m[g] - m_new);
    float l_tile = 0.0f;
#pragma unroll
    for (int i = 0; i < Geo::loads; ++i) l_tile += (s[i][g] = exp2f(s[i][g] - m_new));
    st.l[g] = st.l[g] * alpha + xor_sum<Geo::lanes_per_row, 32>(l_tile);
    st.m[g] = m_new;
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] *= alpha;
  }
#pragma unroll
  for (int i = 0; i < Geo::loads; ++i) {
    float vf[Geo::vec];
    to_float(vs[32 * i + lane], vf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float p = s[i][g];
      if constexpr (is_fp8<T>) p *= v_scale;  // once per 16-element chunk; l keeps the unscaled weight
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] = fmaf(p, vf[j], st.acc[g][j]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(k_threads, k_min_blocks<T>)
    staged_kernel(const Args a, int tokens_per_split, Partials part) {
  using Geo = Geometry<T>;
  extern __shared__ uint4 smem[];  // [k_warps][k_stages][K, V][32 * loads]; after the loop, acc_s
  __shared__ float m_s[k_warps][G], l_s[k_warps][G];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % Geo::lanes_per_row, row0 = lane / Geo::lanes_per_row;
  const int blk = blockIdx.x;  // b * kv_heads + kvh: the cache block and its scales
  const int head0 = blk * G;   // b * heads + kvh * G: the group's first query head (q, out, partials)

  float k_scale = 1.0f, v_scale = 1.0f;
  if constexpr (is_fp8<T>) {
    k_scale = a.k_scale[blk];
    v_scale = a.v_scale[blk];
  }
  float q[G][Geo::vec];
  const float qs = a.softmax_scale * k_log2e;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* qg = a.q + static_cast<std::int64_t>(head0 + g) * k_head_dim + col * Geo::vec;
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) q[g][j] = __bfloat162float(qg[j]) * qs;
  }

  // Rows are head_dim * sizeof(T) = 256 or 128 bytes and cudaMalloc aligns to 256: every row, hence
  // every 16-byte vector, is aligned (cp.async of 16 bytes needs it, like a uint4 load).
  const std::int64_t cache0 = static_cast<std::int64_t>(blk) * a.context * k_head_dim;
  const T* k = static_cast<const T*>(a.k) + cache0;
  const T* v = static_cast<const T*>(a.v) + cache0;
  const int first = blockIdx.y * tokens_per_split;  // < context: every split holds a token
  const int last = min(first + tokens_per_split, a.context);
  // This warp's tiles (step 02's order): tile u starts at row mine0 + stride u, u < units.
  constexpr int stride = k_warps * Geo::tile_rows;
  const int mine0 = first + warp * Geo::tile_rows;
  const int units = mine0 < last ? (last - mine0 + stride - 1) / stride : 0;
  uint4* stages = smem + warp * k_stages * Geo::stage_vecs;

  // Copies tile u into stage u % k_stages and commits a group: an empty one past the warp's last tile,
  // so that "all but the newest k_stages - 1 groups" below is always "tiles 0..u".
  const auto issue = [&](int u) {
    if (u < units) {
      const int r = mine0 + stride * u;
      const int valid = last - r;  // >= 1
      const std::int64_t at = static_cast<std::int64_t>(r) * k_head_dim;
      const auto* kt = reinterpret_cast<const uint4*>(k + at);
      const auto* vt = reinterpret_cast<const uint4*>(v + at);
      uint4* dst = stages + (u % k_stages) * Geo::stage_vecs;
#pragma unroll
      for (int i = 0; i < Geo::loads; ++i) {
        // Never read past the split (past the last one lies the next block, or the end of the cache);
        // a row past it is zero-filled from the tile's first row's address, which src-size 0 leaves
        // unread.
        const bool in = row0 + Geo::rows_per_load * i < valid;
        cp_async16(dst + 32 * i + lane, in ? kt + 32 * i + lane : kt, in);
        cp_async16(dst + 32 * (Geo::loads + i) + lane, in ? vt + 32 * i + lane : vt, in);
      }
    }
    cp_async_commit();
  };

  WarpState<Geo::vec> st;
#pragma unroll
  for (int u = 0; u < k_stages - 1; ++u) issue(u);
  for (int u = 0; u < units; ++u) {
    issue(u + k_stages - 1);            // into the stage tile u - 1 was computed from
    cp_async_wait<k_stages - 1>();      // this lane's copies of tile u have landed
    const uint4* ks = stages + (u % k_stages) * Geo::stage_vecs;
    attend_tile<T>(ks, ks + 32 * Geo::loads, last - (mine0 + stride * u), q, k_scale, v_scale, row0, lane,
                   st);
    __syncwarp();  // stage u % k_stages is read before issue(u + k_stages) overwrites it
  }
  cp_async_wait<0>();  // only empty groups can be left, but the buffer is reused next
  __syncthreads();     // every warp done with its stages: the buffer becomes acc_s

  auto* acc_s = reinterpret_cast<float(*)[G][k_head_dim]>(smem);  // [k_warps][G][head_dim]
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < Geo::vec; ++j) st.acc[g][j] = xor_sum<Geo::lanes_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < Geo::vec; ++j) acc_s[warp][g][col * Geo::vec + j] = st.acc[g][j];
    }
    if (lane == 0) {
      m_s[warp][g] = st.m[g];  // -inf for a warp that had no tile: it weighs exp2(-inf) = 0 below
      l_s[warp][g] = st.l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * k_head_dim; i += k_threads) {
    const int g = i / k_head_dim, d = i % k_head_dim;
    float m = m_s[0][g];  // finite: warp 0 always has a tile
    for (int w = 1; w < k_warps; ++w) m = fmaxf(m, m_s[w][g]);
    float l = 0.0f, o = 0.0f;
    for (int w = 0; w < k_warps; ++w) {
      const float f = exp2f(m_s[w][g] - m);
      l += l_s[w][g] * f;
      o += acc_s[w][g][d] * f;
    }
    const std::int64_t at = static_cast<std::int64_t>(head0 + g) * gridDim.y + blockIdx.y;
    part.acc[at * k_head_dim + d] = o;
    if (d == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

class Staged {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_format(a, [&]<class T>() {
      const auto kernel = staged_kernel<T>;
      const int smem = static_cast<int>(smem_bytes<T>());  // 48 KiB + the static 128 B: needs the opt-in
      AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, smem));
    });
    if (per_sm < 1) throw VariantUnavailable("ch19:kv_quant:03_cp_async: no block fits on an SM");
    m_scratch.make(a, per_sm);
  }

  void launch(const Args& a, cudaStream_t stream) {
    with_format(a, [&]<class T>() {
      const dim3 grid(a.batch * k_kv_heads, m_scratch.splits());
      staged_kernel<T><<<grid, k_threads, smem_bytes<T>(), stream>>>(a, m_scratch.tokens_per_split(),
                                                                     m_scratch.partials());
      AISP_CHECK_LAUNCH();
    });
    launch_merge(a, m_scratch, stream);
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_format(a, [&]<class T>() {
      out = standard_facts(
          kernel_facts(reinterpret_cast<const void*>(staged_kernel<T>), k_threads, smem_bytes<T>()));
    });
    for (auto& f : m_scratch.facts()) out.push_back(std::move(f));
    for (auto& f : quant_facts(a)) out.push_back(std::move(f));
    return out;
  }

 private:
  SplitScratch m_scratch;
};

AISP_REGISTER_STATEFUL_VARIANT(KvQuantProblem, Staged, .step = 3, .slug = "cp_async",
                               .kind = VariantKind::optimized,
                               .summary = "step 02 fed by cp.async: each warp's K/V tiles copied two ahead "
                                          "into a 3-stage shared-memory ring, bytes in flight without "
                                          "registers",
                               .min_cc = 89);

}  // namespace aisp::ch19::kv_quant::v03
