// ch10:hgemm step 07's kernel as a serving GEMM (tile_gemm.hpp). The kernel body is the ladder's own
// (multicast_gemm.cuh); this file only gives it a __global__, the tensor maps and the persistent grid.
#include "serving/gpu/tile_gemm.hpp"

#include <map>
#include <tuple>

#include "chapters/ch10_tensor_cores/hgemm/multicast_gemm.cuh"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

namespace mc = ::aisp::ch10::hgemm::multicast;

namespace {

__global__ void __launch_bounds__(mc::k_threads, 1)
    tile_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  mc::gemm_tiles(map_a, map_b, c, m, n, k);
}

}  // namespace

// Tensor maps by (base, rows, k, box rows); encoding one is a host call of a few microseconds, made once.
struct TileGemm::Maps {
  std::map<std::tuple<const void*, int, int, int>, CUtensorMap> cache;
  const CUtensorMap& get(const __nv_bfloat16* base, int rows, int k, int box_rows) {
    const auto key = std::make_tuple(static_cast<const void*>(base), rows, k, box_rows);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
    return cache.emplace(key, mc::make_tensor_map_k_major(base, rows, k, box_rows)).first->second;
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

bool TileGemm::supports(int rows, int n, int k, int ld_x, int ld_out) const {
  return m_hopper && ld_x == k && ld_out == n && mc::supports(rows, n, k);
}

void TileGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int rows, int n, int k,
                   cudaStream_t stream) {
  const CUtensorMap& map_a = m_maps->get(x, rows, k, mc::k_bm);
  const CUtensorMap& map_b = m_maps->get(w, n, k, mc::k_bn / mc::k_cluster);  // each CTA loads half a B block
  const int grid = mc::persistent_grid(m_clusters, rows, n);
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = mc::launch_config(grid, stream, attr);
  AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, tile_gemm_kernel, map_a, map_b, out, rows, n, k));
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::serving::gpu
