// ch19:fp8_gemm:06_block_scaled — DeepSeek-V3-style block scaling: each 128-wide K block's partial sum
// leaves the tensor cores, is multiplied by its block scales and added to fp32 accumulators in registers.
//
// What changed: steps 02-05 kept one accumulator in the wgmma for the whole K and scaled once at the end,
// which is only right for per-tensor scales and leaves the sum to the FP8 tensor cores' accumulation,
// known to keep fewer than fp32's bits over long K (DeepSeek-V3 technical report, section 3.3.2). Now a
// consumer computes each K block into a fresh partial (the first wgmma of a block has scale-d = 0),
// waits for it, releases the stage, and "promotes" it: acc += partial * scale_a[row][kb] *
// scale_b[n block][kb] on the CUDA cores, in fp32. With block scales that is the only correct place to
// apply them; with per-tensor scales it is the same promotion with one constant scale, for accuracy.
// Registers decide the tile: a 64 x 256 warpgroup tile would need 128 partial + 128 accumulator floats
// per thread, more than the 232 setmaxnreg leaves, so the tile is 128 x 128 (m64n128k32 per consumer
// warpgroup: 64 + 64 floats). The scales of block kb are loaded before the wait on its data, so their L2
// latency hides behind the TMA and the other warpgroup's wgmma.
// Why it costs something: every K block ends in a full wgmma drain (wait_group 0) before the promotion,
// and a 128 x 128 tile reads B twice as often per FLOP as step 03's 128 x 256; the two consumer
// warpgroups interleave, so one's promotion overlaps the other's wgmma.
// Napkin math: per K block a consumer does 64 x 128 x 128 x 2 = 2.1 MFLOP on the tensor cores (~256
// clocks of the SM's FP8 rate shared by two warpgroups) and 64 FMAs per thread of promotion (~64 issue
// slots per warp, 4 warps): a few percent if the other warpgroup keeps the tensor cores busy meanwhile.
// Run: aisp bench run --targets ch19:fp8_gemm:06_block_scaled
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v06 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 128, k_stages = 6;
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    fp8_block_scaled_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                            const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                            __nv_bfloat16* __restrict__ c, int m, int n, int k, int scale_block) {
  extern __shared__ unsigned char raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(b_tiles + k_stages * k_b_bytes);
  std::uint64_t* empty = full + k_stages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < k_stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int tile_m = blockIdx.x, tile_n = blockIdx.y;
  const int blocks = k / k_block_k;
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kb = 0; kb < blocks; ++kb) {
        const int s = kb % k_stages;
        mbar_wait(&empty[s], ((kb / k_stages) & 1) ^ 1);
        mbar_arrive_expect_tx(&full[s], k_a_bytes + k_b_bytes);
        tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, tile_m * k_bm);
        tma_load(b_tiles + s * k_b_bytes, &map_b, &full[s], kb * k_block_k, tile_n * k_bn);
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int half = warpgroup - 1;
    const int t = threadIdx.x % 128;
    const int row_top = tile_m * k_bm + 64 * half + 16 * (t / 32) + (t % 32) / 4;  // fragment rows (fp8_hopper.cuh)
    const int n_blocks = n / k_scale_block;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    float partial[64];
    for (int kb = 0; kb < blocks; ++kb) {
      const int s = kb % k_stages;
      // This block's scales: per-tensor, the one pair; block, rows row_top and row_top + 8 of A's column
      // kb and B's (n block, kb).
      float sa_top, sa_bottom, sb;
      if (scale_block == 0) {
        sa_top = sa_bottom = scale_a[0];
        sb = scale_b[0];
      } else {
        sa_top = scale_a[static_cast<std::size_t>(kb) * m + row_top];
        sa_bottom = scale_a[static_cast<std::size_t>(kb) * m + row_top + 8];
        sb = scale_b[static_cast<std::size_t>(kb) * n_blocks + tile_n];
      }
      mbar_wait(&full[s], (kb / k_stages) & 1);
      const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
      const unsigned char* b = b_tiles + s * k_b_bytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
        wgmma_m64n128k32_e4m3(partial, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();  // the partial is needed in registers now
      if (t == 0) mbar_arrive(&empty[s]);
      const float s_top = sa_top * sb, s_bottom = sa_bottom * sb;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[4 * j] += partial[4 * j] * s_top;
        acc[4 * j + 1] += partial[4 * j + 1] * s_top;
        acc[4 * j + 2] += partial[4 * j + 2] * s_bottom;
        acc[4 * j + 3] += partial[4 * j + 3] * s_bottom;
      }
    }
    store_tile_scaled<128>(acc, 1.0f, c, n, tile_m * k_bm + 64 * half, tile_n * k_bn);
  }
}

class BlockScaled {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(fp8_block_scaled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    fp8_block_scaled_kernel<<<dim3(a.m / k_bm, a.n / k_bn), k_threads, k_smem, stream>>>(
        m_map_a, m_map_b, a.scale_a, a.scale_b, a.c, a.m, a.n, a.k, a.scale_block);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(fp8_block_scaled_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, BlockScaled, .step = 6, .slug = "block_scaled",
                               .kind = VariantKind::step,
                               .summary = "each 128-wide K block's wgmma partial promoted to fp32 registers with its "
                                          "block scales; 128x128 tile, warp specialized, 6 stages",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v06
