// ch10:hgemm:07_cluster_multicast — two CTAs of a cluster share each B tile: each loads half of it once
// and the TMA engine writes it into both CTAs' shared memory (multicast).
//
// What changed: in step 06 two CTAs working on tiles of the same column (same B panel) each fetched the
// 256 x 64 B block from L2 on their own. Now CTAs run in 2 x 1 clusters (CUDA guide "Thread Block
// Clusters"; cudaLaunchAttributeClusterDimension) that always work on vertically adjacent tiles
// (rows 2p and 2p + 1, the same columns). Per stage each CTA loads its own 128 x 64 A block and one
// 128 x 64 half of the shared B block with cp.async.bulk.tensor ... .multicast::cluster (PTX ISA
// "cp.async.bulk.tensor"), which lands the half in both CTAs and completes the bytes on both CTAs'
// "full" barriers. Because a producer now writes into its peer's stage too, a stage is "empty" only when
// the consumers of both CTAs have released it: each consumer warpgroup arrives on the empty barrier of
// both CTAs (mapa + mbarrier.arrive.shared::cluster), 4 arrivals per phase.
// Why it should help: each SM requests 32 KiB instead of 48 KiB from L2 per K block; L2 read bandwidth
// and the TMA request rate stop being a shared bottleneck between the tensor cores' demands.
// Napkin math: at 800 TFLOP/s an SM finishes a 128 x 256 x 64 block (4.2 MFLOP) every ~0.69 us and needs
// its 48 KiB in that time: ~70 GB/s per SM, ~9 TB/s from L2 over 132 SMs in step 06, near what the L2
// can deliver. Multicast cuts each SM's requests to 32 KiB per block, ~6 TB/s in all.
// Run: aisp bench run --targets ch10:hgemm:07_cluster_multicast
// The kernel body lives in multicast_gemm.cuh: the serving engine runs the same kernel (serving/gpu/tile_gemm.cu).
#include "chapters/ch10_tensor_cores/hgemm/multicast_gemm.cuh"
#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v07 {

using namespace multicast;

// The kernel body is in multicast_gemm.cuh (the serving engine runs it too); read it there.
__global__ void __launch_bounds__(k_threads, 1)
    hgemm_multicast_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                           __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  gemm_tiles(map_a, map_b, c, m, n, k);
}

class ClusterMulticast {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_map_a = make_tensor_map_k_major(a.a, a.m, a.k, k_bm);
    m_map_b = make_tensor_map_k_major(a.b, a.n, a.k, k_bn / k_cluster);  // each CTA loads half a B block
    m_grid = persistent_grid(resident_clusters(hgemm_multicast_kernel, a.sm_count), a.m, a.n);
  }
  void launch(const Args& a, cudaStream_t stream) {
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t config = launch_config(m_grid, stream, attr);
    AISP_CUDA_CHECK(cudaLaunchKernelEx(&config, hgemm_multicast_kernel, m_map_a, m_map_b, a.c, a.m, a.n, a.k));
    AISP_CHECK_LAUNCH();
  }
  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> f =
        standard_facts(kernel_facts(reinterpret_cast<const void*>(hgemm_multicast_kernel), k_threads, k_smem));
    f.push_back({"grid", std::to_string(m_grid)});
    return f;
  }

 private:
  CUtensorMap m_map_a{}, m_map_b{};
  int m_grid = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(HgemmProblem, ClusterMulticast, .step = 7, .slug = "cluster_multicast",
                               .kind = VariantKind::optimized,
                               .summary = "2x1 clusters on adjacent tiles: B halves TMA-multicast to both CTAs, "
                                          "cluster-wide empty barriers; persistent, grouped",
                               .min_cc = 90, .features = {"sm_90a"});

}  // namespace aisp::ch10::hgemm::v07
