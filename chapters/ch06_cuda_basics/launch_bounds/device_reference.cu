// ch06:launch_bounds — the trusted device reference: one thread per output value, matrix read from
// global memory each time, the source pixel through idx when gathering; and the index fill. The host reference (reference.hpp) checks it at test sizes.
#include "chapters/ch06_cuda_basics/launch_bounds/problem.hpp"

namespace aisp::ch06::launch_bounds {

__global__ void mix_reference_kernel(const float* x, const float* m, const std::uint32_t* idx, float* y,
                                     std::size_t values) {
  const std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= values) return;
  const std::size_t p = idx ? idx[v / k_channels] : v / k_channels;
  const int r = static_cast<int>(v % k_channels);
  float acc = 0.0f;
  for (int c = 0; c < k_channels; ++c) acc = fmaf(m[r * k_channels + c], x[p * k_channels + c], acc);
  y[v] = acc;
}

void mix_reference(const Args& a, float* ref, cudaStream_t stream) {
  constexpr int threads = 256;
  const std::size_t values = a.pixels * k_channels;
  const auto blocks = static_cast<unsigned>((values + threads - 1) / threads);
  mix_reference_kernel<<<blocks, threads, 0, stream>>>(a.x, a.m, a.idx, ref, values);
  AISP_CHECK_LAUNCH();
}

__global__ void fill_gather_index_kernel(std::uint32_t* idx, std::size_t pixels, int gather, std::uint64_t multiplier,
                                         std::uint64_t table) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels; p += stride) {
    idx[p] = static_cast<std::uint32_t>(source_pixel(gather, p, pixels, multiplier, table));
  }
}

void fill_gather_index(std::uint32_t* idx, std::size_t pixels, int gather, std::uint64_t multiplier,
                       std::uint64_t table, cudaStream_t stream) {
  fill_gather_index_kernel<<<1024, 256, 0, stream>>>(idx, pixels, gather, multiplier, table);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch06::launch_bounds
