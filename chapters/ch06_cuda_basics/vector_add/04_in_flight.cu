// ch06:vector_add:04_in_flight — several independent 16-byte loads in flight per thread.
//
// What changed: each thread issues the loads of k_unroll float4 elements of a and of b (k_unroll grid
// strides apart, so each is still coalesced across the warp) before it adds and stores any of them.
// Why it helps: by Little's law, achieved bandwidth = bytes in flight / latency. The loads do not depend
// on each other, so the SM issues all 2 * k_unroll of them back to back and waits for DRAM once per
// group instead of once per element: 128 bytes of loads in flight per thread instead of 32, without more
// threads. It also covers the moments when a warp stalls on its stores.
// Napkin math: the same 3.22 GB; expect at or near the measured DRAM copy ceiling (>= 90% of it).
// Run: aisp bench run --targets ch06:vector_add:04_in_flight
#include "chapters/ch06_cuda_basics/vector_add/problem.hpp"

namespace aisp::ch06::vector_add::v04 {

constexpr int k_unroll = 4;

__global__ void add_in_flight_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                     float* __restrict__ c, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* a4 = reinterpret_cast<const float4*>(a);
  const auto* b4 = reinterpret_cast<const float4*>(b);
  auto* c4 = reinterpret_cast<float4*>(c);
  std::size_t i = first;
  // Main loop: all loads first; the arrays live in registers because they are indexed only with
  // compile-time constants (fully unrolled loops).
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 x[k_unroll];
    float4 y[k_unroll];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) {
      x[k] = a4[i + k * stride];
      y[k] = b4[i + k * stride];
    }
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) {
      c4[i + k * stride] = make_float4(x[k].x + y[k].x, x[k].y + y[k].y, x[k].z + y[k].z, x[k].w + y[k].w);
    }
  }
  for (; i < n4; i += stride) {
    const float4 x = a4[i];
    const float4 y = b4[i];
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) c[j] = a[j] + b[j];
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int threads = 256;
  add_in_flight_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(a.a, a.b, a.c, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(VectorAddProblem, launch, .step = 4, .slug = "in_flight", .kind = VariantKind::optimized,
                      .summary = "four independent float4 loads of each input in flight per thread");

}  // namespace aisp::ch06::vector_add::v04
