// ch07:copy:06_streaming_hints — tell the caches the bytes pass through once.
//
// What changed (from step 04, same grid, same four 16-byte loads in flight per thread): the loads and
// stores carry cache-policy hints. Loads are `ld.global.nc.L1::no_allocate.L2::256B`: read-only path, no
// L1 line allocated for data that is never reread, and each L2 miss asks DRAM for the whole 256-byte
// block around it (PTX ISA, "Data Movement and Conversion Instructions: ld", .level::prefetch_size).
// Stores are `st.global.cs` ("cache streaming, likely to be accessed once": PTX ISA, "Cache Operators"),
// which the L2 evicts first.
// Why it should help: cudaMemcpyAsync does not appear to run on the SMs at all (Nsight Compute finds no
// kernel for vendor_memcpy, docs/profiling.md), so what it gains must be in how its traffic reaches
// DRAM, presumably long sequential runs. The register-path steps hand the L2 a mix of 32-byte sector
// misses and dirty output lines that leave in LRU order. 256-byte prefetches turn a warp's 512-byte load
// into two whole DRAM bursts at once, and evict-first output lines are written back soon after they are
// written, closer to address order, instead of competing with the input stream for L2 space.
// Napkin math: the same 8.59 GB per launch at n = 2^30 and the same bytes in flight as step 04
// (sm_count x 2048 threads x 4 x 16 B = 17 MB on an H100, several times bandwidth x latency); the gap to
// vendor_memcpy (4-8% on H100/H200) is DRAM efficiency, not parallelism. Whether the hints close it is
// to be measured (the sweep prints both hints alone and together).
// Run: aisp bench run --targets ch07:copy:06_streaming_hints
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::v06 {

constexpr int k_unroll = 4;

__device__ __forceinline__ float4 load_streaming(const float4* p) {
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void store_streaming(float4* p, float4 v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

__global__ void copy_streaming_kernel(const float* __restrict__ src, float* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* src4 = reinterpret_cast<const float4*>(src);
  auto* dst4 = reinterpret_cast<float4*>(dst);
  std::size_t i = first;
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 v[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) v[k] = load_streaming(src4 + i + k * stride);
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) store_streaming(dst4 + i + k * stride, v[k]);
  }
  for (; i < n4; i += stride) store_streaming(dst4 + i, load_streaming(src4 + i));
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) dst[j] = src[j];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  copy_streaming_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 6, .slug = "streaming_hints", .kind = VariantKind::step,
                      .summary = "step 04 plus streaming cache hints: ld.nc.L1::no_allocate.L2::256B, st.cs",
                      .min_cc = 80);

}  // namespace aisp::ch07::copy::v06
