// ch16:paged_attention:05_pipelined — step 04 fed by a per-warp cp.async double buffer across tiles.
//
// What changed: in step 04 a warp loads a page-table entry, then the tile's K vectors into registers,
// computes the scores, then loads V, and only then moves on: page-table load -> K load -> math -> V
// load -> math serialize, and no load of the next tile is in flight while a tile is computed. Here each
// warp copies its next tile's K and V (16-byte `cp.async.cg.shared.global`, zero-filled past the
// context with src-size 0) into its own half of a two-stage shared-memory buffer, then waits for the
// current tile's group (`cp.async.wait_group 1`) and computes it from shared memory. The page-table
// entry of the page after the one being copied is loaded a page ahead, so that dependent load is off the
// path too. A lane reads back only the 16-byte vectors it copied itself (vector 32 i + lane of the tile
// is step 04's row row0 + rows_per_load i, column col), so a warp needs no barrier but a __syncwarp.
// The math, the tiles (capped at 8 loads per lane: 8 KiB of K and V per warp and stage), the split plan
// and the merge kernel are step 04's.
// Why it helps: Nsight Compute shows step 04 moving exactly the declared bytes from DRAM (L2 hits 0.8%)
// at 70% of the H200's ceiling: latency not hidden. Each warp now keeps a whole tile of K and V (8 KiB at
// the defaults) in flight while it computes the previous one, instead of 4 KiB only while it waits; the
// vectors no longer sit in registers, so the 2 x 8 uint4 staging registers of step 04 go away.
// Napkin math: 3 blocks x 4 warps x 8 KiB = 96 KiB in flight per SM, against ~4.8 TB/s x ~0.8 us / 132 SMs
// ~ 29 KB that the H200 asks; shared memory 4 warps x 2 stages x 8 KiB = 64 KiB per block (3 per SM
// fit in 228 KiB). The bound is step 04's: 2.15 GB at ~4.5 TB/s, ~0.48 ms; expect >= 85% of the DRAM read
// ceiling on the H200 too.
// Run: aisp bench run --targets ch16:paged_attention:05_pipelined
// PTX ISA: "Data Movement and Conversion Instructions: cp.async" (src-size < cp-size zero-fills the
// rest), "cp.async.commit_group", "cp.async.wait_group".
#include <algorithm>

#include "chapters/ch16_production_inference/paged_attention/problem.hpp"
#include "chapters/ch16_production_inference/paged_attention/split_merge.cuh"
#include "chapters/ch16_production_inference/paged_attention/pipelined_tile.cuh"
#include "chapters/ch16_production_inference/paged_attention/split_plan.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch16::paged_attention::v05 {

using namespace ::aisp::ch16::paged_attention::pipelined;  // PageGeometry, WarpState, attend_tile, cp.async

template <int D, int P, int GS>
__global__ void __launch_bounds__(k_threads, 1)
    pipelined_split_kernel(const Args a, int pages_per_split, Partials part) {
  using G = PageGeometry<D, P, GS>;
  extern __shared__ uint4 smem[];  // [k_warps][k_stages][K, V][32 * loads]; then acc_s
  __shared__ float m_s[k_warps][GS], l_s[k_warps][GS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % G::vecs_per_row, row0 = lane / G::vecs_per_row;
  const int b = blockIdx.x / a.kv_heads, kvh = blockIdx.x % a.kv_heads;
  const int group = a.heads / a.kv_heads;
  const int head0 = b * a.heads + kvh * group;  // [b][kvh * group + g] in q, out and the partials

  float q[GS][8];
  const float scale = a.scale * k_log2e;
#pragma unroll
  for (int g = 0; g < GS; ++g) {
    const auto* qg = reinterpret_cast<const uint4*>(a.q + static_cast<std::int64_t>(head0 + g) * D);
    const uint4 raw = g < group ? qg[col] : make_uint4(0, 0, 0, 0);  // unused slots: q = 0
    to_float8(raw, q[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] *= scale;
  }

  // The warp's pages are mine0, mine0 + k_warps, ...: n_pages of them, tiles_per_page units each.
  WarpState<GS> st;
  const std::int32_t* pages = a.page_table + static_cast<std::int64_t>(b) * a.pages_per_seq;
  const int first = blockIdx.y * pages_per_split;  // < pages_per_seq: every split has a page
  const int last = min(first + pages_per_split, a.pages_per_seq);
  const int mine0 = first + warp;
  const int n_pages = mine0 < last ? (last - mine0 + k_warps - 1) / k_warps : 0;
  const int units = n_pages * G::tiles_per_page;
  uint4* stages = smem + warp * k_stages * G::stage_vecs;
  int phys = n_pages > 0 ? pages[mine0] : 0;                  // the page being copied
  int phys_ahead = n_pages > 1 ? pages[mine0 + k_warps] : 0;  // the one after it, loaded a page early

  // Rows of unit u that hold tokens: <= 0 for a tile wholly past the context (nothing to copy).
  const auto tile_valid = [&](int u) {
    const int pg = mine0 + k_warps * (u / G::tiles_per_page);
    return min(P, a.context - pg * P) - (u % G::tiles_per_page) * G::rows_per_tile;
  };
  // Copies unit u into stage u % 2 and commits a group (an empty one past the end, so that
  // wait_group 1 below always means "all but the newest").
  const auto issue = [&](int u) {
    if (u < units) {
      const int j = u / G::tiles_per_page, t = u % G::tiles_per_page;
      if (t == 0 && j > 0) {
        phys = phys_ahead;
        phys_ahead = j + 1 < n_pages ? pages[mine0 + k_warps * (j + 1)] : 0;
      }
      const int valid = tile_valid(u);
      const std::int64_t at = (static_cast<std::int64_t>(phys) * a.kv_heads + kvh) * P * D +
                              static_cast<std::int64_t>(t) * G::rows_per_tile * D;
      const auto* k = reinterpret_cast<const uint4*>(a.k_pool + at);
      const auto* v = reinterpret_cast<const uint4*>(a.v_pool + at);
      uint4* dst = stages + (u % k_stages) * G::stage_vecs;
#pragma unroll
      for (int i = 0; i < G::loads; ++i) {
        const bool in = row0 + G::rows_per_load * i < valid;  // never read the NaN tail
        cp_async16(dst + 32 * i + lane, k + 32 * i + lane, in);
        cp_async16(dst + 32 * (G::loads + i) + lane, v + 32 * i + lane, in);
      }
    }
    cp_async_commit();
  };

  issue(0);
  for (int u = 0; u < units; ++u) {
    issue(u + 1);
    cp_async_wait<1>();  // this lane's copies of unit u have landed
    const int valid = tile_valid(u);
    if (valid > 0) {
      const uint4* ks = stages + (u % k_stages) * G::stage_vecs;
      attend_tile<D, P, GS>(ks, ks + 32 * G::loads, valid, q, row0, lane, st);
    }
    __syncwarp();  // stage u % 2 is read before the next issue(u + 2) overwrites it
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp done with its stages: the buffer becomes acc_s

  auto* acc_s = reinterpret_cast<float(*)[GS][D]>(smem);  // [k_warps][GS][D]
#pragma unroll
  for (int g = 0; g < GS; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[g][j] = xor_sum<G::vecs_per_row, 32>(st.acc[g][j]);
    if (row0 == 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc_s[warp][g][8 * col + j] = st.acc[g][j];
    }
    if (lane == 0) {
      m_s[warp][g] = st.m[g];  // -inf for a warp that had no page: it weighs exp2(-inf) = 0 below
      l_s[warp][g] = st.l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += k_threads) {
    const int g = i / D, d = i % D;
    float m = m_s[0][g];
    for (int w = 1; w < k_warps; ++w) m = fmaxf(m, m_s[w][g]);
    float l = 0.0f, o = 0.0f;
    for (int w = 0; w < k_warps; ++w) {
      const float f = exp2f(m_s[w][g] - m);
      l += l_s[w][g] * f;
      o += acc_s[w][g][d] * f;
    }
    const std::int64_t at = static_cast<std::int64_t>(head0 + g) * gridDim.y + blockIdx.y;
    part.acc[at * D + d] = o;
    if (d == 0) {
      part.m[at] = m;
      part.l[at] = l;
    }
  }
}

// Calls f.template operator()<D, P, GS>() with GS the group size rounded up to a power of two.
template <class F>
void with_group(const Args& a, F&& f) {
  const int group = a.heads / a.kv_heads;
  with_shape(a, [&]<int D, int P>() {
    if (group == 1) {
      f.template operator()<D, P, 1>();
    } else if (group == 2) {
      f.template operator()<D, P, 2>();
    } else if (group <= 4) {
      f.template operator()<D, P, 4>();
    } else {
      f.template operator()<D, P, 8>();
    }
  });
}

class Pipelined {
 public:
  void setup(const Args& a, cudaStream_t) {
    int per_sm = 0;
    with_group(a, [&]<int D, int P, int GS>() {
      const auto kernel = pipelined_split_kernel<D, P, GS>;
      const int smem = static_cast<int>(smem_bytes<D, P, GS>());  // > 48 KiB needs the opt-in
      AISP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, k_threads, smem));
    });
    m_plan = plan_splits(a.batch * a.kv_heads, a.pages_per_seq, a.sm_count * per_sm, k_warps);
    const std::size_t n = static_cast<std::size_t>(a.batch) * a.heads * m_plan.splits;
    m_m = DeviceBuffer<float>(n);
    m_l = DeviceBuffer<float>(n);
    m_acc = DeviceBuffer<float>(n * a.head_dim);
  }

  void launch(const Args& a, cudaStream_t stream) {
    const Partials part{m_m.data(), m_l.data(), m_acc.data()};
    with_group(a, [&]<int D, int P, int GS>() {
      pipelined_split_kernel<D, P, GS><<<dim3(a.batch * a.kv_heads, m_plan.splits), k_threads,
                                         smem_bytes<D, P, GS>(), stream>>>(a, m_plan.pages_per_split, part);
      AISP_CHECK_LAUNCH();
      merge_splits_kernel<D><<<a.batch * a.heads, D, 0, stream>>>(a, part, m_plan.splits);
      AISP_CHECK_LAUNCH();
    });
  }

  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> out;
    with_group(a, [&]<int D, int P, int GS>() {
      const auto* kernel = reinterpret_cast<const void*>(pipelined_split_kernel<D, P, GS>);
      out = standard_facts(kernel_facts(kernel, k_threads, smem_bytes<D, P, GS>()));
    });
    out.push_back({"splits", std::to_string(m_plan.splits)});
    out.push_back({"pages_per_split", std::to_string(m_plan.pages_per_split)});
    return out;
  }

 private:
  SplitPlan m_plan;
  DeviceBuffer<float> m_m, m_l, m_acc;
};

AISP_REGISTER_STATEFUL_VARIANT(PagedAttentionProblem, Pipelined, .step = 5, .slug = "pipelined",
                               .kind = VariantKind::optimized,
                               .summary = "step 04 with each warp's next K/V tile copied by cp.async into a "
                                          "shared-memory double buffer while it computes the current one");

}  // namespace aisp::ch16::paged_attention::v05
