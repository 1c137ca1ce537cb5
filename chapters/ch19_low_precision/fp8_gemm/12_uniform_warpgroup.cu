// ch19:fp8_gemm:12_uniform_warpgroup — 11 with the warpgroup index broadcast from lane 0 (__shfl_sync), so
// that the compiler knows it is the same in every lane of a warp and builds everything derived from it,
// the wgmma descriptors first, on the uniform datapath.
//
// What changed: one line. `threadIdx.x / 128` is the same for the 32 lanes of a warp, but the compiler
// cannot prove it (threadIdx varies by lane), so every value derived from it is kept per lane: the A
// descriptor (which depends on the consumer's half of the tile), the stage addresses, the scale-slot
// addresses. A wgmma reads its descriptors from uniform registers, so each was built in vector registers
// (LOP3, SHF, IADD3) and moved over with R2UR before each wgmma. A value returned by __shfl_sync from one
// lane is provably warp-uniform (CUDA C++ Programming Guide, "Warp Shuffle Functions"; CUTLASS computes
// its warp-group index the same way, canonical_warp_group_idx), and ptxas then keeps the whole chain in
// uniform registers (UIADD3, ULOP3, USHF).
// Why it should help: the side-by-side profile with cuBLASLt's kernel (README, 8192, block scales) found
// step 11 issuing the same QGMMA and promotion FFMA as the vendor but ~79 M more warp instructions of
// integer and uniform bookkeeping, ~38 per K block per warp, with `dispatch` its first stall reason and the
// ALU pipe at 25.1% of issue against the vendor's 6.5%. In the SASS this step has 17 R2UR where step 11 has
// 50, 23 LOP3 where it has 63, 21 IADD3 where it has 38 (the uniform-datapath counts rise instead).
// Napkin math: if most of the ~38 extra instructions per K block go to the uniform pipe, the vector
// issue slots the promotion's FFMA need are freed and the dispatch stalls with them; the tensor pipes
// (68.8% against 82.1%) gain what those stalls cost the wgmma issue, a few percent, not the whole gap (the
// L2 traffic without multicast, 1.5x the vendor's, stays).
// Shared memory: step 10's.
// Run: aisp bench run --targets ch19:fp8_gemm:11_promotion_overlap,ch19:fp8_gemm:12_uniform_warpgroup --axis scale_block=128
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v12 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 128, k_stages = 5;
constexpr int k_group_m = 16;   // tile rows walked together (the L2-friendly order)
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
// Per consumer warpgroup two 64 x 64 bf16 staging tiles: one filled while the other's store may still read it.
constexpr int k_chunk_cols = 64, k_chunk_bytes = 64 * k_chunk_cols * 2, k_chunk_buffers = 2;
constexpr int k_chunks = k_bn / k_chunk_cols;  // per consumer warpgroup per tile
constexpr int k_staging_bytes = 2 * k_chunk_buffers * k_chunk_bytes;
// A stage's scales: the tile's 128 A scales of the K block (bulk-copied), then the B scale (16-byte slot).
constexpr int k_sa_bytes = k_bm * 4, k_scale_slot_bytes = k_sa_bytes + 16;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + k_staging_bytes + k_stages * k_scale_slot_bytes +
                       1024 /* alignment */ + 2 * k_stages * 8 /* mbarriers */;
static_assert(k_smem <= 227 * 1024, "over the 227 KiB of shared memory a CTA may use on sm_90");

// The scale slots are read and written through 32-bit shared-window addresses: through the generic
// pointers (whose alignment arithmetic hides that they point to shared memory) the compiler emits generic
// LD/ST, which take the longer generic path.
__device__ inline float ld_shared_f32(unsigned address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
  return v;
}
__device__ inline void st_shared_f32(unsigned address, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}

__global__ void __launch_bounds__(k_threads, 1)
    fp8_uniform_warpgroup_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                               const __grid_constant__ CUtensorMap map_c, const float* __restrict__ scale_a,
                               const float* __restrict__ scale_b, int m, int n, int k, int scale_block) {
  extern __shared__ unsigned char raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  unsigned char* staging = b_tiles + k_stages * k_b_bytes;
  unsigned char* scale_slots = staging + k_staging_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(scale_slots + k_stages * k_scale_slot_bytes);
  std::uint64_t* empty = full + k_stages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int tiles_m = m / k_bm, tiles_n = n / k_bn, tiles = tiles_m * tiles_n;
  const int blocks = k / k_block_k;
  // Warp-uniform to the compiler too: broadcast from lane 0 (the file's header).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      const bool blocked = scale_block != 0;
      const int n_blocks = n / k_scale_block;
      const unsigned stage_bytes = k_a_bytes + k_b_bytes + (blocked ? k_sa_bytes : 0);
      int it = 0;  // K blocks loaded so far, across tiles: picks the stage and the phase
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
        // The B scale of the first K block; each iteration loads the next one's before it waits.
        float sb_next = blocked ? scale_b[tile.y] : 0.0f;
        for (int kb = 0; kb < blocks; ++kb, ++it) {
          const int s = it % k_stages;
          const float sb = sb_next;
          if (blocked && kb + 1 < blocks) sb_next = scale_b[static_cast<std::size_t>(kb + 1) * n_blocks + tile.y];
          mbar_wait(&empty[s], ((it / k_stages) & 1) ^ 1);
          unsigned char* slot = scale_slots + s * k_scale_slot_bytes;
          if (blocked) st_shared_f32(smem_u32(slot + k_sa_bytes), sb);  // before the arrive that publishes it
          mbar_arrive_expect_tx(&full[s], stage_bytes);
          if (blocked) {
            bulk_load(slot, scale_a + static_cast<std::size_t>(kb) * m + tile.x * k_bm, k_sa_bytes, &full[s]);
          }
          tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, tile.x * k_bm);
          tma_load(b_tiles + s * k_b_bytes, &map_b, &full[s], kb * k_block_k, tile.y * k_bn);
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int half = warpgroup - 1;
    const int t_in = threadIdx.x % 128;
    const int row_in_tile = 64 * half + 16 * (t_in / 32) + (t_in % 32) / 4;  // fragment rows: this and + 8
    const bool signals = t_in == 0;         // also the thread that issues and waits for the TMA stores
    const int epilogue_barrier = 1 + half;  // a named barrier per consumer warpgroup (0 is __syncthreads)
    unsigned char* my_staging = staging + half * k_chunk_buffers * k_chunk_bytes;
    // Per-tensor scales: one product for the whole kernel.
    const float scale = scale_block == 0 ? scale_a[0] * scale_b[0] : 0.0f;
    float acc[64];
    float part_even[64], part_odd[64];  // the partial sums of even and odd K blocks
    // This K block's scales. The producer rewrites the slot once the stage is released, and one thread
    // releases it for the whole warpgroup after the wgmma: every thread must hold the values before it
    // issues the wgmma (the empty asm makes them needed there; the warpgroup's wgmma cannot complete
    // before all four warps have issued it).
    const auto scales_of = [&](int s, float& s_top, float& s_bottom) {
      s_top = s_bottom = scale;
      if (scale_block != 0) {
        const unsigned slot = smem_u32(scale_slots + s * k_scale_slot_bytes);
        const float sb = ld_shared_f32(slot + k_sa_bytes);
        s_top = ld_shared_f32(slot + 4 * row_in_tile) * sb;
        s_bottom = ld_shared_f32(slot + 4 * (row_in_tile + 8)) * sb;
        asm volatile("" ::"f"(s_top), "f"(s_bottom));
      }
    };
    // Waits for K block number `it` (counted across tiles) to land, reads its scales, issues its wgmma
    // group into `p` and commits it.
    const auto issue = [&](int it_k, float(&p)[64], float& s_top, float& s_bottom) {
      const int s = it_k % k_stages;
      mbar_wait(&full[s], (it_k / k_stages) & 1);
      scales_of(s, s_top, s_bottom);
      const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
      const unsigned char* b = b_tiles + s * k_b_bytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
        wgmma_m64n128k32_e4m3(p, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kk > 0);
      }
      wgmma_commit();
    };
    // K block `it_k`'s group has completed (the wait_group just before): release its stage and add its
    // scaled partial sums. fence_regs keeps the compiler from reading p above that wait.
    const auto promote = [&](int it_k, float(&p)[64], float s_top, float s_bottom) {
      fence_regs(p);
      if (signals) mbar_arrive(&empty[it_k % k_stages]);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[4 * j] += p[4 * j] * s_top;
        acc[4 * j + 1] += p[4 * j + 1] * s_top;
        acc[4 * j + 2] += p[4 * j + 2] * s_bottom;
        acc[4 * j + 3] += p[4 * j + 3] * s_bottom;
      }
    };
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      float even_top, even_bottom, odd_top, odd_bottom;
      // The loop keeps one shape so that ptxas can follow the groups: at its top block kb (even) is in
      // flight; it issues kb + 1 and promotes kb under it, then issues kb + 2 and promotes kb + 1 under
      // it. The last one or two blocks are finished after the loop, ending with no group in flight.
      issue(it, part_even, even_top, even_bottom);
      int kb = 0;
      for (; kb + 2 < blocks; kb += 2) {
        issue(it + kb + 1, part_odd, odd_top, odd_bottom);
        wgmma_wait<1>();
        promote(it + kb, part_even, even_top, even_bottom);
        issue(it + kb + 2, part_even, even_top, even_bottom);
        wgmma_wait<1>();
        promote(it + kb + 1, part_odd, odd_top, odd_bottom);
      }
      if (kb + 1 < blocks) {
        issue(it + kb + 1, part_odd, odd_top, odd_bottom);
        wgmma_wait<1>();
        promote(it + kb, part_even, even_top, even_bottom);
        wgmma_wait<0>();
        promote(it + kb + 1, part_odd, odd_top, odd_bottom);
      } else {
        wgmma_wait<0>();
        promote(it + kb, part_even, even_top, even_bottom);
      }
      it += blocks;
      // The epilogue (kernels/common/hopper.cuh): four 64-column chunks through the two staging buffers,
      // each written to C by a TMA store.
      store_tile_via_staging<k_chunks, k_chunk_buffers>(acc, my_staging, signals, epilogue_barrier, &map_c,
                                                        tile.y * k_bn, tile.x * k_bm + 64 * half);
    }
    // Shared memory must outlive the last stores' reads, and C must be written when the kernel ends.
    if (signals) bulk_wait_group<0>();
  }
}

class UniformWarpgroup {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    m_map_c = make_tensor_map_k_major(a.c, a.m, a.n, 64);  // C in 64 x 64 boxes, step 08's layout
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_uniform_warpgroup_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    const int tiles = (a.m / k_bm) * (a.n / k_bn);
    const int grid = a.sm_count < tiles ? a.sm_count : tiles;  // one CTA per SM (smem allows no more)
    fp8_uniform_warpgroup_kernel<<<grid, k_threads, k_smem, stream>>>(
        m_map_a, m_map_b, m_map_c, a.scale_a, a.scale_b, a.m, a.n, a.k, a.scale_block);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(
        kernel_facts(reinterpret_cast<const void*>(fp8_uniform_warpgroup_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{}, m_map_c{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, UniformWarpgroup, .step = 12, .slug = "uniform_warpgroup",
                               .kind = VariantKind::step,
                               .summary = "11 with the warpgroup index broadcast by __shfl_sync: warp-uniform to "
                                          "the compiler, so descriptors and addresses use the uniform datapath",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v12
