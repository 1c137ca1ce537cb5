// ch07:copy:04_in_flight — several independent 16-byte loads in flight per thread.
//
// What changed: each thread issues k_unroll independent float4 loads (k_unroll grid-strides apart, so
// every one of them is still coalesced across the warp) before it stores any of them.
// Why it helps: by Little's law, bandwidth = bytes in flight / latency. With one load outstanding per
// thread, a full GPU keeps sm_count * 2048 * 16 bytes in flight, which at DRAM latency (~600-800 ns)
// falls short of what HBM can deliver. Loads that do not depend on each other are issued back to back,
// multiplying the bytes in flight by k_unroll without more threads.
// Napkin math: the same 8.59 GB per launch; expect this step at or near the measured DRAM copy ceiling,
// i.e. within a few percent of cudaMemcpyAsync (vendor_memcpy).
// Run: aisp bench run --targets ch07:copy:04_in_flight
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::v04 {

constexpr int k_unroll = 4;

__global__ void copy_in_flight_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                      std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* src4 = reinterpret_cast<const float4*>(src);
  auto* dst4 = reinterpret_cast<float4*>(dst);
  std::size_t i = first;
  // Main loop: k_unroll loads issued before the first store; the array lives in registers because it is
  // indexed only with compile-time constants (unrolled loops).
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 v[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) v[k] = src4[i + k * stride];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) dst4[i + k * stride] = v[k];
  }
  for (; i < n4; i += stride) dst4[i] = src4[i];
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) dst[j] = src[j];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  copy_in_flight_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 4, .slug = "in_flight", .kind = VariantKind::step,
                      .summary = "four independent float4 loads in flight per thread before the stores");

}  // namespace aisp::ch07::copy::v04
