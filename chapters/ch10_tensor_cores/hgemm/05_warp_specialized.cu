// ch10:hgemm:05_warp_specialized — one warpgroup loads, two compute: producer and consumers meet only
// at full/empty mbarriers.
//
// What changed: step 04 issued TMA loads from the same threads that compute, and refilled a stage only
// after every wgmma of the block had finished and the whole CTA had met at __syncthreads. Now the CTA is
// three warpgroups: warpgroup 0 is the producer, one thread of which issues TMA loads as soon as a stage
// is empty; warpgroups 1 and 2 are consumers, each computing 64 x 256 of the 128 x 256 tile. A stage has
// two mbarriers: "full" (the producer's expect_tx, completed by the TMA bytes) and "empty" (one arrival
// per consumer warpgroup). A consumer keeps one wgmma group in flight: it issues block kb, then waits for
// block kb - 1 to retire (wgmma.wait_group 1) and frees that stage, so the tensor cores always have the
// next block queued. setmaxnreg moves registers from the producer (40 per thread) to the consumers (232)
// (PTX ISA "setmaxnreg").
// Why it should help: no CTA-wide barrier per K block, no bubble between consecutive wgmma groups, and
// loads run ahead by up to 4 stages regardless of what the consumers are doing.
// Napkin math: per K block a consumer issues 4 wgmma (64 x 256 x 16 each); an SM's tensor cores do
// ~4096 dense bf16 FLOP per clock, so the CTA's 128 x 256 x 64 block takes ~1024 clocks, during which
// its 48 KiB of operands must arrive (~48 B/clock per SM): 4 stages hide ~3 blocks of load latency.
// Run: aisp bench run --targets ch10:hgemm:05_warp_specialized
#include "chapters/ch10_tensor_cores/hgemm/hopper_gemm.cuh"
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v05 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_threads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int k_a_bytes = k_bm * k_block_k * 2, k_b_bytes = k_bn * k_block_k * 2;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_ws_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    __nv_bfloat16* __restrict__ c, int n, int k) {
  extern __shared__ unsigned char raw[];
  // The 128-byte swizzle repeats every 1024 bytes: tiles start 1024-aligned (smem_desc's base offset 0).
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
    const int half = warpgroup - 1;  // rows 64 * half .. of the CTA's tile
    float d[128];
    for (int kb = 0; kb < blocks; ++kb) {
      const int s = kb % k_stages;
      mbar_wait(&full[s], (kb / k_stages) & 1);
      const unsigned char* a = a_tiles + s * k_a_bytes + half * (64 * 128);
      const unsigned char* b = b_tiles + s * k_b_bytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < k_block_k / 16; ++kk) {
        wgmma_m64n256k16(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
      }
      wgmma_commit();
      // Block kb stays in flight; block kb - 1 has retired, so its stage can be refilled.
      wgmma_wait<1>();
      if (kb > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(kb - 1) % k_stages]);
    }
    wgmma_wait<0>();
    store_tile_64x256(d, c, n, tile_m * k_bm + 64 * half, tile_n * k_bn);
  }
}

class WarpSpecialized {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(cudaFuncSetAttribute(hgemm_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    hgemm_ws_kernel<<<dim3(a.m / k_bm, a.n / k_bn), k_threads, k_smem, stream>>>(m_map_a, m_map_b, a.c, a.n, a.k);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_ws_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, WarpSpecialized, .step = 5, .slug = "warp_specialized",
                               .kind = VariantKind::step,
                               .summary = "TMA producer warpgroup + 2 wgmma consumer warpgroups, full/empty mbarriers, "
                                          "4 stages, setmaxnreg",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v05
