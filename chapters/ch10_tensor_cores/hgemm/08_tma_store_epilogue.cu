// ch10:hgemm:08_tma_store_epilogue — the epilogue goes through shared memory and TMA stores, so the
// consumers hand a finished tile to the TMA engine and return to the tensor cores at once.
//
// What changed: in step 07 each consumer warpgroup wrote its 64 x 256 accumulators to C with 64 4-byte
// st.global per thread; during those stores the CTA's tensor cores had nothing queued (only the producer's
// loads of the next tile overlapped). Now each consumer warpgroup rounds its accumulators to bf16 into a
// 64 x 64 staging tile in shared memory (128-byte swizzled, so the stores are free of bank conflicts),
// fences it to the async proxy (fence.proxy.async), meets its own warpgroup at a named barrier, and one
// thread issues cp.async.bulk.tensor ... .global.shared::cta (a TMA store, PTX ISA "cp.async.bulk.tensor")
// of the 64 x 64 box. Four such chunks cover the warpgroup's 64 x 256; two staging tiles per warpgroup
// alternate, and before a staging tile is rewritten its previous store must have read it
// (cp.async.bulk.wait_group.read 1). The global writes then drain under the next tile's main loop. Tile
// shape, stages, persistence, grouped order and the 2 x 1 multicast of B are step 07's, unchanged.
// Why it should help: at 4096^3 an SM runs 4 tiles (512 tiles / 132 SMs = 3.88 waves). At the H100's
// dense bf16 peak (989 TFLOP/s, spec) a tile's 268 MFLOP take 36 us of one SM; 07 spends 49.5 us per tile
// (198 us in all, the README's H100 table) and cuBLAS's cooperative kernel, same tile count, 44 us. Part
// of those ~5 us per tile is 07's epilogue, during which the tensor cores have nothing queued.
// Napkin math: 07's epilogue is 512 warp-wide STG.32 per tile, each writing 16 bytes into each of 8 rows:
// 4096 L1 wavefronts and 4096 half-filled 32-byte sectors to L2, ~2-4k clocks (1-2 us at ~1.7 GHz).
// Here the consumers issue 512 conflict-free STS.32 (64 KiB at 128 B/clock: ~512 clocks) and wait at 8
// named barriers per warpgroup; the 8 TMA stores of 8 KiB drain under the next tile's main loop. If the
// epilogue is the cause, that is +2-4% at 4096 (about half that at 8192, where a tile has twice the K
// work); the drain of each tile's last wgmma group and the 3.88-wave tail it does not touch.
// Shared memory: 4 stages x 48 KiB + 2 warpgroups x 2 x 8 KiB staging = 224 KiB, + barriers and 1 KiB
// of alignment, under the 227 KiB a CTA may have.
// Run: aisp bench run --targets ch10:hgemm:08_tma_store_epilogue
// The kernel body is in tma_store_gemm.cuh: the serving engine runs the same kernel (serving/gpu/tile_gemm.cu).
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "chapters/ch10_tensor_cores/hgemm/tma_store_gemm.cuh"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v08 {

using namespace store_epilogue;

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_tma_store_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                           const __grid_constant__ CUtensorMap map_c, int m, int n, int k) {
  gemm_tiles(map_a, map_b, map_c, m, n, k);
}

class TmaStoreEpilogue {
 public:
  void setup(const Args& a, cudaStream_t) {
    // No tails: 2 x 1 clusters of 128 x 256 tiles, K blocks of 64. Every shape of shapes.hpp (multiples of
    // 256) fits; a shape that does not is declined (SKIPPED with this reason), never computed wrongly.
    if (!supports(a.m, a.n, a.k)) {
      throw VariantUnavailable("08_tma_store_epilogue needs M % 256 == 0, N % 256 == 0 and K % 64 == 0, got " +
                               std::to_string(a.m) + " x " + std::to_string(a.n) + " x " + std::to_string(a.k));
    }
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn / k_cluster);  // each CTA loads half a B block
    // C (M x N, N contiguous) has the same 2-D shape as a K-major operand: boxes of 64 rows x 64 columns
    // (128 bytes, the 128-byte swizzle row) that stage_chunk_64x64 lays out.
    m_map_c = make_tensor_map_k_major(a.c, a.m, a.n, 64);
    m_grid = persistent_grid(resident_clusters(hgemm_tma_store_kernel, a.sm_count), a.m, a.n);
  }
  void launch(const Args& a, cudaStream_t stream) {
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t config = launch_config(m_grid, stream, attr);
    AISP_CUDA_CHECK(
        cudaLaunchKernelEx(&config, hgemm_tma_store_kernel, m_map_a, m_map_b, m_map_c, a.m, a.n, a.k));
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f =
        standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_tma_store_kernel), k_threads, k_smem));
    f.push_back({"grid", std::to_string(m_grid)});
    return f;
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{}, m_map_c{};
  int m_grid = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, TmaStoreEpilogue, .step = 8, .slug = "tma_store_epilogue",
                               .kind = VariantKind::optimized,
                               .summary = "07 with the epilogue staged in swizzled shared memory and written by TMA "
                                          "stores, so consumers return to wgmma at once",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v08
