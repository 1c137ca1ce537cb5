// ch10:hgemm:04_wgmma_tma — Hopper's own path: TMA brings the tiles, wgmma multiplies them straight
// from shared memory (sm_90a).
//
// What changed: step 03 moved tiles with cp.async and fed mma.sync from registers (ldmatrix): every warp
// computed a 16 x 8 x 16 slice at a time and had to stage its operands through registers first. Now:
// - the TMA engine copies a whole 128 x 64 (A) and 256 x 64 (B) tile per stage with one instruction each,
//   described by a tensor map made once in setup(), writing the 128-byte swizzled layout that avoids bank
//   conflicts; its bytes complete on an mbarrier (CUDA guide "Asynchronous Data Copies using TMA");
// - a warpgroup (4 warps) issues wgmma.mma_async m64n256k16, which reads both operands from shared
//   memory through descriptors and accumulates 64 x 256 fp32 in registers (PTX ISA "wgmma.mma_async").
//   Two warpgroups cover the 128 x 256 tile; 4 stages of 48 KiB are in flight.
// Everything else stays simple on purpose: thread 0 both computes and issues the loads, each K block's
// wgmma are waited for in full (wgmma.wait_group 0) and the CTA meets at __syncthreads before the freed
// stage is refilled. Step 05 removes exactly those waits.
// Why it should help: a 64 x 256 x 16 wgmma is 16 times the work of the whole warpgroup's mma.sync,
// issued once, and its operands never pass through registers.
// Napkin math: 128 x 256 x 64 per K block = 4.2 MFLOP on an SM that does ~4096 dense bf16 FLOP per clock
// (989 TFLOP/s / 132 SMs / 1.83 GHz), ~1024 clocks; the serialising waits add the wgmma drain and a CTA
// barrier per block on top, while the loads (4 stages ahead) should mostly be hidden.
// Run: aisp bench run --targets ch10:hgemm:04_wgmma_tma
#include "chapters/ch10_tensor_cores/hgemm/hopper_gemm.cuh"
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v04 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_threads = 256;  // 2 warpgroups, each 64 x 256 of the tile
constexpr int k_a_bytes = k_bm * k_block_k * 2, k_b_bytes = k_bn * k_block_k * 2;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_wgmma_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                           __nv_bfloat16* __restrict__ c, int n, int k) {
  extern __shared__ unsigned char raw[];
  // The 128-byte swizzle repeats every 1024 bytes: tiles start 1024-aligned (smem_desc's base offset 0).
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + k_stages * k_a_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(b_tiles + k_stages * k_b_bytes);

  const int tile_m = blockIdx.x, tile_n = blockIdx.y;
  const int blocks = k / k_block_k;
  const auto load = [&](int kb) {
    const int s = kb % k_stages;
    mbar_arrive_expect_tx(&full[s], k_a_bytes + k_b_bytes);
    tma_load(a_tiles + s * k_a_bytes, &map_a, &full[s], kb * k_block_k, tile_m * k_bm);
    tma_load(b_tiles + s * k_b_bytes, &map_b, &full[s], kb * k_block_k, tile_n * k_bn);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < k_stages; ++s) mbar_init(&full[s], 1);
    fence_barrier_init();
    for (int kb = 0; kb < blocks && kb < k_stages; ++kb) load(kb);
  }
  __syncthreads();

  const int half = threadIdx.x / 128;  // this warpgroup's rows: 64 * half ..
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
    wgmma_wait<0>();
    __syncthreads();  // both warpgroups are done reading stage s
    if (threadIdx.x == 0 && kb + k_stages < blocks) load(kb + k_stages);
  }
  store_tile_64x256(d, c, n, tile_m * k_bm + 64 * half, tile_n * k_bn);
}

class WgmmaTma {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(
        cudaFuncSetAttribute(hgemm_wgmma_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    hgemm_wgmma_tma_kernel<<<dim3(a.m / k_bm, a.n / k_bn), k_threads, k_smem, stream>>>(m_map_a, m_map_b, a.c,
                                                                                        a.n, a.k);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_wgmma_tma_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, WgmmaTma, .step = 4, .slug = "wgmma_tma", .kind = VariantKind::step,
                               .summary = "TMA tiles (128B swizzle, 4 stages) into wgmma m64n256k16, 2 warpgroups, "
                                          "128x256 tile",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v04
