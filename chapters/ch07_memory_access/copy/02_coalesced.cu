// ch07:copy:02_coalesced — consecutive threads copy consecutive elements (grid-stride loop).
//
// What changed: the index. Thread t copies t, t + stride, t + 2*stride, ... where stride is the whole
// grid, so at every step a warp touches 32 consecutive floats: 128 bytes, four full 32-byte sectors.
// Why it helps: every byte of every sector fetched is used, so DRAM moves the 8 bytes per element the
// copy needs and no more (CUDA C++ Programming Guide, "Device Memory Accesses": coalescing).
// Napkin math: 8.59 GB per launch; at the measured DRAM copy ceiling this should already be within
// reach of it, limited now by how many loads each thread keeps in flight (one 4-byte load at a time).
// Run: aisp bench run --targets ch07:copy:02_coalesced
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::v02 {

__global__ void copy_coalesced_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                      std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  copy_coalesced_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 2, .slug = "coalesced", .kind = VariantKind::step,
                      .summary = "grid-stride loop: a warp reads 128 contiguous bytes per step");

}  // namespace aisp::ch07::copy::v02
