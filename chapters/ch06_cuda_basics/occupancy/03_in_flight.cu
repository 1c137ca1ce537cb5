// ch06:occupancy:03_in_flight — more bytes in flight per thread at the same occupancy.
//
// What changed: each thread loads k_unroll float4s (grid strides apart, each coalesced across the warp)
// before it computes and stores any of them: 64 bytes of loads in flight per thread instead of 4. The
// grid is still one full wave from the occupancy API.
// Why it helps, and what it shows: by Little's law what DRAM needs is bytes in flight, and they rise 16x
// per thread while the predicted occupancy stays where it was (ptxas fits this kernel in 32 registers:
// the facts column reads 100% at every block size, as for steps 01 and 02). Equal occupancy, different
// time: occupancy counts warps, not the memory requests they keep outstanding.
// Napkin math: the same 2.15 GB; expect the DRAM bound (~90% of the copy ceiling) at every block size.
// Run: aisp bench run --targets ch06:occupancy:03_in_flight --axis block=256
#include "chapters/ch06_cuda_basics/occupancy/problem.hpp"

namespace aisp::ch06::occupancy::v03 {

constexpr int k_unroll = 4;

__device__ float4 affine4(float4 v) {
  return make_float4(fmaf(k_alpha, v.x, k_beta), fmaf(k_alpha, v.y, k_beta), fmaf(k_alpha, v.z, k_beta),
                     fmaf(k_alpha, v.w, k_beta));
}

__global__ void affine_in_flight_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* y4 = reinterpret_cast<float4*>(y);
  std::size_t i = first;
  for (; i + (k_unroll - 1) * stride < n4; i += k_unroll * stride) {
    float4 v[k_unroll];  // registers: indexed only with compile-time constants
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) v[k] = x4[i + k * stride];
#pragma unroll
    for (int k = 0; k < k_unroll; ++k) y4[i + k * stride] = affine4(v[k]);
  }
  for (; i < n4; i += stride) y4[i] = affine4(x4[i]);
  for (std::size_t j = 4 * n4 + first; j < n; j += stride) y[j] = fmaf(k_alpha, x[j], k_beta);
}

const void* kernel() { return reinterpret_cast<const void*>(&affine_in_flight_kernel); }

void launch(const Args& a, cudaStream_t stream) {
  affine_in_flight_kernel<<<occupancy_grid(a, kernel()), a.block, 0, stream>>>(a.x, a.y, a.n);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) { return occupancy_facts(a, kernel()); }

AISP_REGISTER_VARIANT_WITH_FACTS(OccupancyProblem, launch, facts, .step = 3, .slug = "in_flight",
                                 .kind = VariantKind::optimized,
                                 .summary = "four float4 loads in flight per thread; grid from the occupancy API");

}  // namespace aisp::ch06::occupancy::v03
