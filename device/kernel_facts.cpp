#include "device/kernel_facts.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "device/cuda_check.hpp"

namespace aisp {

KernelFacts kernel_facts(const void* kernel, int block_threads, std::size_t dynamic_smem) {
  cudaFuncAttributes attr{};
  AISP_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int device = 0, max_threads_per_sm = 0, warp = 32;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, device));
  KernelFacts k;
  k.regs_per_thread = attr.numRegs;
  k.local_bytes_per_thread = attr.localSizeBytes;
  k.static_smem_bytes = attr.sharedSizeBytes;
  k.max_threads_per_block = attr.maxThreadsPerBlock;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.active_blocks_per_sm, kernel, block_threads,
                                                                 dynamic_smem));
  const int warps_per_block = (block_threads + warp - 1) / warp;
  k.occupancy = static_cast<double>(k.active_blocks_per_sm * warps_per_block) / (max_threads_per_sm / warp);
  return k;
}

std::vector<Fact> standard_facts(const KernelFacts& k) {
  return {{"regs", std::to_string(k.regs_per_thread)},
          {"local_bytes", std::to_string(k.local_bytes_per_thread)},
          {"smem_bytes", std::to_string(k.static_smem_bytes)},
          {"blocks_per_sm", std::to_string(k.active_blocks_per_sm)},
          {"occupancy_pct", fmt::format("{:.1f}", 100.0 * k.occupancy)}};
}

}  // namespace aisp
