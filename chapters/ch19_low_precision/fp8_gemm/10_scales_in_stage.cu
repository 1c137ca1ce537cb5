// ch19:fp8_gemm:10_scales_in_stage — the producer brings each K block's scales into the stage with its
// tiles, so the consumers read them from shared memory instead of waiting on L2.
//
// What changed: in steps 06-09 each consumer thread loaded its rows' A scales and the tile's B scale from
// global memory at the top of every K block (three ld.global per thread per block), and the promotion
// after the wgmma waited on them: the profile of step 07/09 at 4096 with block scales puts
// long_scoreboard (L1TEX results) first among the consumers' stalls, 1.8-2.1 warps per issued instruction,
// and these are the consumers' only global loads. Now the stage holds them too: the producer copies the
// tile's 128 A scales of the K block (512 contiguous bytes of scale_a's [k block][row] layout) with one
// bulk copy (PTX ISA "cp.async.bulk", completing on the stage's "full" barrier with the tiles), and
// writes the one B scale into the stage with st.shared before its arrive (mbarrier.arrive has release
// semantics and the consumers' wait acquire semantics, PTX ISA "mbarrier": the write is visible to whoever
// sees the phase complete). The B scale is strided in memory (one per [k block][column block]), so the
// producer loads it one K block ahead, while it waits for the next empty stage. Consumers read both from
// shared memory (~30 clocks) right after the stage's "full" wait and before they release the stage.
// With per-tensor scales the consumers read the two scalars once per kernel and the stage holds none.
// Why it should help: the stage arrives up to 5 K blocks before the consumers need it, so the scales'
// L2 latency (hundreds of clocks, once per K block per warp) leaves the consumers' critical path; the
// bulk copy is 512 bytes next to the stage's 32 KiB of tiles.
// Napkin math (4096^3, block scales): 1024 tiles of 128 x 128 on 132 SMs is 7.8 waves, 8 tiles x 32 K
// blocks per SM: step 09's 161.8 us is ~0.63 us per K block, against ~0.33 us of tensor work (4.2 MFLOP at
// ~12.9 TFLOP/s per SM, the measured FP8 ceiling over 132 SMs). A scale load issued at the top of a block
// overlaps the wait for the stage and the wgmma (~0.33 us); an L2 hit under this load can take longer, and
// whatever exceeds the overlap is exposed in every block.
// Shared memory: 5 stages (not 09's 6: the scale slots push 6 over the 227 KiB) x (32 KiB + 528 bytes),
// + 2 warpgroups x 2 x 8 KiB of staging, + barriers and 1 KiB of alignment.
// Run: aisp bench run --targets ch19:fp8_gemm:10_scales_in_stage --axis scale_block=128
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v10 {

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
    fp8_scales_in_stage_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
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
  const int warpgroup = threadIdx.x / 128;

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
    float partial[64];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int2 tile = grouped_tile_coords(t, tiles_m, tiles_n, k_group_m);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      for (int kb = 0; kb < blocks; ++kb, ++it) {
        const int s = it % k_stages;
        mbar_wait(&full[s], (it / k_stages) & 1);
        // This block's scales. The producer rewrites the slot once the stage is released, and one thread
        // releases it for the whole warpgroup after the wgmma: every thread must hold the values before it
        // issues the wgmma (the empty asm makes them needed there; the warpgroup's wgmma cannot complete
        // before all four warps have issued it).
        float s_top = scale, s_bottom = scale;
        if (scale_block != 0) {
          const unsigned slot = smem_u32(scale_slots + s * k_scale_slot_bytes);
          const float sb = ld_shared_f32(slot + k_sa_bytes);
          s_top = ld_shared_f32(slot + 4 * row_in_tile) * sb;
          s_bottom = ld_shared_f32(slot + 4 * (row_in_tile + 8)) * sb;
          asm volatile("" ::"f"(s_top), "f"(s_bottom));
        }
        const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
        const unsigned char* b = b_tiles + s * k_b_bytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
          wgmma_m64n128k32_e4m3(partial, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        if (signals) mbar_arrive(&empty[s]);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          acc[4 * j] += partial[4 * j] * s_top;
          acc[4 * j + 1] += partial[4 * j + 1] * s_top;
          acc[4 * j + 2] += partial[4 * j + 2] * s_bottom;
          acc[4 * j + 3] += partial[4 * j + 3] * s_bottom;
        }
      }
      // The epilogue (kernels/common/hopper.cuh): four 64-column chunks through the two staging buffers,
      // each written to C by a TMA store.
      store_tile_via_staging<k_chunks, k_chunk_buffers>(acc, my_staging, signals, epilogue_barrier, &map_c,
                                                        tile.y * k_bn, tile.x * k_bm + 64 * half);
    }
    // Shared memory must outlive the last stores' reads, and C must be written when the kernel ends.
    if (signals) bulk_wait_group<0>();
  }
}

class ScalesInStage {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    m_map_c = make_tensor_map_k_major(a.c, a.m, a.n, 64);  // C in 64 x 64 boxes, step 08's layout
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_scales_in_stage_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    const int tiles = (a.m / k_bm) * (a.n / k_bn);
    const int grid = a.sm_count < tiles ? a.sm_count : tiles;  // one CTA per SM (smem allows no more)
    fp8_scales_in_stage_kernel<<<grid, k_threads, k_smem, stream>>>(
        m_map_a, m_map_b, m_map_c, a.scale_a, a.scale_b, a.m, a.n, a.k, a.scale_block);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(
        kernel_facts(reinterpret_cast<const void*>(fp8_scales_in_stage_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{}, m_map_c{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, ScalesInStage, .step = 10, .slug = "scales_in_stage",
                               .kind = VariantKind::step,
                               .summary = "09 with each K block's scales brought into the stage by the producer "
                                          "(bulk copy of A's, st.shared of B's), read by consumers from shared memory",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v10
