// The occupancy formula (core/measure/occupancy.hpp) against the CUDA runtime on the real GPU: the table's limits
// must match the device's properties, and for kernels of known registers (cudaFuncGetAttributes) and
// shared memory, at many block sizes, the formula's blocks per SM must equal
// cudaOccupancyMaxActiveBlocksPerMultiprocessor's. A .cu file because it compiles its own kernels.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/measure/occupancy.hpp"
#include "device/cuda_check.hpp"

namespace {

using namespace aisp;

// Few registers, no shared memory.
__global__ void small_kernel(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

// Many registers: 64 values loaded up front and all live until the sum (ptxas keeps them in registers).
__global__ void register_heavy_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  float v[64];
#pragma unroll
  for (int k = 0; k < 64; ++k) v[k] = in[k * n + threadIdx.x];
  float acc = 0;
#pragma unroll
  for (int k = 0; k < 64; ++k) acc = fmaf(acc, v[k], v[63 - k]);
  out[threadIdx.x] = acc;
}

// Static shared memory of two sizes, so that shared memory binds at some block sizes.
template <int Bytes>
__global__ void static_smem_kernel(float* out) {
  __shared__ float tile[Bytes / sizeof(float)];
  tile[threadIdx.x % (Bytes / sizeof(float))] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % (Bytes / sizeof(float))];
}

// Dynamic shared memory, opted in to the device's per-block maximum.
__global__ void dynamic_smem_kernel(float* out) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

struct Case {
  std::string name;
  const void* kernel;
  std::vector<std::size_t> dynamic_smem;
};

occupancy::ArchLimits this_device(cudaDeviceProp& prop) {
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const auto arch = occupancy::architecture_for_cc(prop.major * 10 + prop.minor);
  return arch.value_or(occupancy::ArchLimits{});
}

TEST(Occupancy, TableMatchesTheDeviceProperties) {
  cudaDeviceProp prop{};
  const auto arch = this_device(prop);
  if (arch.cc == 0) GTEST_SKIP() << "no table entry for sm_" << prop.major << prop.minor;
  EXPECT_EQ(arch.max_warps_per_sm, prop.maxThreadsPerMultiProcessor / prop.warpSize);
  EXPECT_EQ(arch.max_blocks_per_sm, prop.maxBlocksPerMultiProcessor);
  EXPECT_EQ(arch.regs_per_sm, prop.regsPerMultiprocessor);
  EXPECT_EQ(arch.regs_per_block, prop.regsPerBlock);
  EXPECT_EQ(arch.max_threads_per_block, prop.maxThreadsPerBlock);
  EXPECT_EQ(arch.smem_per_sm, static_cast<std::int64_t>(prop.sharedMemPerMultiprocessor));
  EXPECT_EQ(arch.smem_per_block_optin, static_cast<std::int64_t>(prop.sharedMemPerBlockOptin));
  EXPECT_EQ(arch.smem_per_block_default, static_cast<std::int64_t>(prop.sharedMemPerBlock));
  EXPECT_EQ(arch.smem_reserved_per_block, static_cast<int>(prop.reservedSharedMemPerBlock));
}

TEST(Occupancy, FormulaMatchesTheRuntimeForCompiledKernels) {
  cudaDeviceProp prop{};
  const auto arch = this_device(prop);
  if (arch.cc == 0) GTEST_SKIP() << "no table entry for sm_" << prop.major << prop.minor;
  const auto* dyn = reinterpret_cast<const void*>(&dynamic_smem_kernel);
  AISP_CUDA_CHECK(cudaFuncSetAttribute(dyn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(prop.sharedMemPerBlockOptin)));
  const std::vector<Case> cases = {
      {"small", reinterpret_cast<const void*>(&small_kernel), {0}},
      {"register_heavy", reinterpret_cast<const void*>(&register_heavy_kernel), {0}},
      {"static_smem_8k", reinterpret_cast<const void*>(&static_smem_kernel<8 * 1024>), {0}},
      {"static_smem_40k", reinterpret_cast<const void*>(&static_smem_kernel<40 * 1024>), {0}},
      {"dynamic_smem", dyn, {0, 1000, 20000, 48 * 1024, 100 * 1024, prop.sharedMemPerBlockOptin}},
  };
  int compared = 0;
  bool saw_register_bound = false, saw_smem_bound = false;
  for (const auto& c : cases) {
    cudaFuncAttributes attr{};
    AISP_CUDA_CHECK(cudaFuncGetAttributes(&attr, c.kernel));
    for (int threads : {32, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024}) {
      if (threads > attr.maxThreadsPerBlock) continue;  // the kernel cannot launch this many
      for (std::size_t dynamic : c.dynamic_smem) {
        int runtime_blocks = 0;
        AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&runtime_blocks, c.kernel, threads, dynamic));
        const occupancy::KernelShape shape{threads, attr.numRegs,
                                           static_cast<std::int64_t>(attr.sharedSizeBytes + dynamic)};
        const std::string where = c.name + " threads=" + std::to_string(threads) + " regs=" +
                                  std::to_string(attr.numRegs) + " smem=" + std::to_string(shape.smem_per_block);
        try {
          const auto o = occupancy::compute(arch, shape);
          EXPECT_EQ(o.active_blocks, runtime_blocks) << where;
          for (auto l : o.binding) {
            saw_register_bound |= l == occupancy::Limiter::registers && o.active_warps < arch.max_warps_per_sm;
            saw_smem_bound |= l == occupancy::Limiter::shared_memory;
          }
        } catch (const UsageError& e) {
          EXPECT_EQ(runtime_blocks, 0) << where << ": the formula says it cannot launch (" << e.what() << ")";
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 40);
  // The cases must exercise the limits the formula is about, or agreement proves little.
  EXPECT_TRUE(saw_register_bound) << "no case was bound by registers below full occupancy";
  EXPECT_TRUE(saw_smem_bound) << "no case was bound by shared memory";
}

}  // namespace
