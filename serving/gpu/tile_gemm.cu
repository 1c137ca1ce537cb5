// ch10:hgemm's fastest kernel (step 08) as a serving GEMM (tile_gemm.hpp). The kernel body is the
// ladder's own (tma_store_gemm.cuh); this file only gives it a __global__, the tensor maps and the grid.
#include "serving/gpu/tile_gemm.hpp"

#include <cstdint>
#include <map>
#include <tuple>

#include "chapters/ch10_tensor_cores/hgemm/tma_store_gemm.cuh"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

namespace mc = ::aisp::ch10::hgemm::store_epilogue;

namespace {

__global__ void __launch_bounds__(mc::k_threads, 1)
    tile_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_c, int m, int n, int k) {
  mc::gemm_tiles(map_a, map_b, map_c, m, n, k);
}

}  // namespace

// Tensor maps by (base, rows, columns, box rows, row stride); encoding one is a host call of a few
// microseconds, made once per operand (the runner's buffers and weights never move).
struct TileGemm::Maps {
  std::map<std::tuple<const void*, int, int, int, int>, CUtensorMap> cache;
  const CUtensorMap& get(const __nv_bfloat16* base, int rows, int cols, int box_rows, int row_stride) {
    const auto key = std::make_tuple(static_cast<const void*>(base), rows, cols, box_rows, row_stride);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
    return cache.emplace(key, mc::make_tensor_map_k_major(base, rows, cols, box_rows, row_stride)).first->second;
  }
};

TileGemm::TileGemm() : m_maps(std::make_unique<Maps>()) {
  int device = 0, major = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&m_sm_count, cudaDevAttrMultiProcessorCount, device));
  // The build's sm_90a code runs on compute capability 9.0 only (an "a" target is not forward compatible).
  m_hopper = major == 9;
  if (m_hopper) m_clusters = mc::resident_clusters(tile_gemm_kernel, m_sm_count);
}

TileGemm::~TileGemm() = default;

bool TileGemm::supports(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* out, int rows, int n,
                        int k, int ld_x, int ld_out) const {
  // TMA: 16-byte aligned bases and row strides (the runner's buffers start at allocations, which are
  // 256-byte aligned; an offset into one may not be). C is written through a map of width n: no stride.
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return m_hopper && ld_x >= k && ld_x % 8 == 0 && ld_out == n && aligned(x) && aligned(w) && aligned(out) &&
         mc::supports(rows, n, k);
}

void TileGemm::run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int rows, int n,
                   int k, cudaStream_t stream) {
  const CUtensorMap& map_a = m_maps->get(x, rows, k, mc::k_bm, ld_x);
  const CUtensorMap& map_b = m_maps->get(w, n, k, mc::k_bn / mc::k_cluster, k);  // each CTA loads half a B block
  const CUtensorMap& map_c = m_maps->get(out, rows, n, 64, n);  // the epilogue's 64 x 64 staging boxes
  const int grid = mc::persistent_grid(m_clusters, rows, n);
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = mc::launch_config(grid, stream, attr);
  AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, tile_gemm_kernel, map_a, map_b, map_c, rows, n, k));
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
