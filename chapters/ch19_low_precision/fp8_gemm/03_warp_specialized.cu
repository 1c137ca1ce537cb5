// ch19:fp8_gemm:03_warp_specialized — one warpgroup loads, two compute: producer and consumers meet only
// at full/empty mbarriers, and the tensor cores always have the next K block queued.
//
// What changed: step 02 issued the TMA loads from a computing thread and refilled a stage only after
// every wgmma of the block had finished and the whole CTA had met at __syncthreads. Now the CTA is three
// warpgroups (ch10:hgemm's step 05, with FP8 operands): warpgroup 0 is the producer, one thread of which
// issues a stage's TMA loads as soon as both consumers have released it ("empty" mbarrier, two
// arrivals); warpgroups 1 and 2 each compute 64 x 256 of the 128 x 256 tile, keep one wgmma group in
// flight (issue block kb, wait for kb - 1 with wgmma.wait_group 1, release its stage), and apply the
// per-tensor scales in the epilogue. setmaxnreg moves registers from the producer (40 per thread) to
// the consumers (232) (PTX ISA "setmaxnreg").
// Why it should help: with FP8 a K block takes half the time of a bf16 one for the same bytes, so the
// bubbles of step 02 (the wgmma drain and a CTA barrier per block) cost twice as much of the total.
// Napkin math: ~1024 clocks of tensor work per 128-wide K block per CTA (step 02's header); a drain plus a
// barrier of a few hundred clocks per block is tens of percent, which this step should win back.
// Run: aisp bench run --targets ch19:fp8_gemm:03_warp_specialized
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v03 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    fp8_ws_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                  __nv_bfloat16* __restrict__ c, int n, int k) {
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
        mbar_wait(&empty[s], ((kb / k_stages) & 1) ^ 1);  // the first round passes at once
        mbar_arrive_expect_tx(&full[s], k_a_bytes + k_b_bytes);
        tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, tile_m * k_bm);
        tma_load(b_tiles + s * k_b_bytes, &map_b, &full[s], kb * k_block_k, tile_n * k_bn);
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int half = warpgroup - 1;
    float d[128];
    for (int kb = 0; kb < blocks; ++kb) {
      const int s = kb % k_stages;
      mbar_wait(&full[s], (kb / k_stages) & 1);
      const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
      const unsigned char* b = b_tiles + s * k_b_bytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
        wgmma_m64n256k32_e4m3(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
      }
      wgmma_commit();
      // Block kb stays in flight; block kb - 1 has retired, so its stage can be refilled.
      wgmma_wait<1>();
      if (kb > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(kb - 1) % k_stages]);
    }
    wgmma_wait<0>();
    store_tile_scaled<256>(d, scale_a[0] * scale_b[0], c, n, tile_m * k_bm + 64 * half, tile_n * k_bn);
  }
}

class WarpSpecialized {
 public:
  void setup(const Args& a, cudaStream_t) {
    if (a.scale_block != 0) {
      throw VariantUnavailable("per-tensor scales only: block scales must be applied inside the K loop (step 06)");
    }
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(cudaFuncSetAttribute(fp8_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    fp8_ws_kernel<<<dim3(a.m / k_bm, a.n / k_bn), k_threads, k_smem, stream>>>(m_map_a, m_map_b, a.scale_a,
                                                                               a.scale_b, a.c, a.n, a.k);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(fp8_ws_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, WarpSpecialized, .step = 3, .slug = "warp_specialized",
                               .kind = VariantKind::step,
                               .summary = "TMA producer warpgroup + 2 FP8 wgmma consumer warpgroups, full/empty "
                                          "mbarriers, 4 stages, setmaxnreg",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v03
