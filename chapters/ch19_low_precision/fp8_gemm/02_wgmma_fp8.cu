// ch19:fp8_gemm:02_wgmma_fp8 — the FP8 tensor cores themselves: TMA brings e4m3 tiles, wgmma multiplies
// them, and the per-tensor scales are applied once, in the epilogue.
//
// What changed: step 01 widened every code to bf16 and ran a bf16 GEMM. Now the kernel is ch10:hgemm's
// 04_wgmma_tma with FP8 operands: the TMA engine copies 128 x 128 (A) and 256 x 128 (B) byte tiles per
// stage with the 128-byte swizzle, two warpgroups each issue wgmma.mma_async m64n256k32 .e4m3.e4m3
// (PTX ISA "wgmma.mma_async") into 64 x 256 fp32 accumulators, and the epilogue multiplies by
// scale_a * scale_b before rounding to bf16: a per-tensor scale commutes with the sum, so it costs one
// multiply per output. Block scales do not commute with the K loop: this step reports SKIPPED for them.
// As in ch10's step 04, the structure is simple on purpose: thread 0 computes and loads, each K block's
// wgmma are waited for in full and the CTA meets at __syncthreads before a stage is refilled (step 03
// removes that). The accumulators stay in the tensor cores' own accumulation for the whole K: no
// promotion to separate fp32 registers (see problem.hpp's tolerance and step 06).
// Why it should help: an FP8 wgmma does twice the FLOPs of a bf16 one per instruction and per byte of
// shared memory, and nothing is dequantized: A and B are read as stored, 1 byte per element.
// Napkin math: per K block of 128 the CTA does 128 x 256 x 128 x 2 = 8.4 MFLOP; an SM's FP8 tensor cores
// do ~8192 dense FLOP per clock (1979 TFLOP/s / 132 SMs / 1.83 GHz), ~1024 clocks per block, during
// which 48 KiB arrive: the same bytes per clock as ch10's bf16 step at the same time per block.
// Run: aisp bench run --targets ch19:fp8_gemm:02_wgmma_fp8
#include "chapters/ch19_low_precision/fp8_gemm/fp8_hopper.cuh"
#include "chapters/ch19_low_precision/fp8_gemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch19::fp8_gemm::v02 {

using namespace hopper;

constexpr int k_bm = 128, k_bn = 256, k_stages = 4;
constexpr int k_threads = 256;  // 2 warpgroups, each 64 x 256 of the tile
constexpr int k_a_bytes = k_bm * k_block_k, k_b_bytes = k_bn * k_block_k;
constexpr int k_smem = k_stages * (k_a_bytes + k_b_bytes) + 1024 /* alignment */ + 1024 /* barriers */;

__global__ void __launch_bounds__(k_threads, 1)
    fp8_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const float* __restrict__ scale_a, const float* __restrict__ scale_b,
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
    for (int kk = 0; kk < k_block_k / k_wgmma_k; ++kk) {
      wgmma_m64n256k32_e4m3(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kb > 0 || kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // both warpgroups are done reading stage s
    if (threadIdx.x == 0 && kb + k_stages < blocks) load(kb + k_stages);
  }
  store_tile_scaled<256>(d, scale_a[0] * scale_b[0], c, n, tile_m * k_bm + 64 * half, tile_n * k_bn);
}

class WgmmaFp8 {
 public:
  void setup(const Args& a, cudaStream_t) {
    if (a.scale_block != 0) {
      throw VariantUnavailable("per-tensor scales only: block scales must be applied inside the K loop (step 06)");
    }
    m_map_a = make_tensor_map_fp8_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_fp8_k_major(a.b, a.n, a.k, k_bn);
    AISP_CUDA_CHECK(cudaFuncSetAttribute(fp8_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
  }
  void launch(const Args& a, cudaStream_t stream) {
    fp8_wgmma_kernel<<<dim3(a.m / k_bm, a.n / k_bn), k_threads, k_smem, stream>>>(m_map_a, m_map_b, a.scale_a,
                                                                                  a.scale_b, a.c, a.n, a.k);
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    return standard_facts(kernel_facts(reinterpret_cast<const void*>(fp8_wgmma_kernel), k_threads, k_smem));
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
};

AISP_REGISTER_STATEFUL_VARIANT(Fp8GemmProblem, WgmmaFp8, .step = 2, .slug = "wgmma_fp8", .kind = VariantKind::step,
                               .summary = "TMA e4m3 tiles into wgmma m64n256k32 .e4m3, 2 warpgroups, 128x256 tile, "
                                          "per-tensor scales in the epilogue",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch19::fp8_gemm::v02
