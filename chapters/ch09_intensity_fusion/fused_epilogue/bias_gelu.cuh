// The epilogue of ch09:fused_epilogue on the device: bias + GELU (tanh form, as reference.hpp), once as a
// functor the GEMM applies to its accumulators and once as a separate elementwise kernel over C.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "device/cuda_check.hpp"

namespace aisp::ch09::fused_epilogue {

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * fmaf(0.044715f * x, x * x, x)));
}

// For the GEMM's epilogue parameter (aisp::ch09::sgemm_pipelined_kernel): acc -> gelu(acc + bias[col]).
struct BiasGelu {
  const float* bias;
  __device__ float operator()(float acc, int col) const { return gelu_tanh(acc + __ldg(&bias[col])); }
};

// The unfused epilogue: c = gelu(c + bias) in place, float4 at a time (n is a multiple of 4, as every
// ch09 GEMM size is). One extra read and write of C through DRAM.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    bias_gelu_kernel(float* __restrict__ c, const float* __restrict__ bias, std::size_t m, int n) {
  const std::size_t count4 = m * n / 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * THREADS;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * THREADS + threadIdx.x; i < count4;
       i += stride) {
    float4 v = reinterpret_cast<float4*>(c)[i];
    const int col = static_cast<int>((4 * i) % n);
    v.x = gelu_tanh(v.x + bias[col]);
    v.y = gelu_tanh(v.y + bias[col + 1]);
    v.z = gelu_tanh(v.z + bias[col + 2]);
    v.w = gelu_tanh(v.w + bias[col + 3]);
    reinterpret_cast<float4*>(c)[i] = v;
  }
}

// Launches bias_gelu_kernel over m x n with one full wave of blocks (every SM at its thread limit).
inline void launch_bias_gelu(float* c, const float* bias, int m, int n, int sm_count,
                             int max_threads_per_sm, cudaStream_t stream) {
  constexpr int threads = 256;
  bias_gelu_kernel<threads>
      <<<sm_count * (max_threads_per_sm / threads), threads, 0, stream>>>(c, bias, m, n);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch09::fused_epilogue
