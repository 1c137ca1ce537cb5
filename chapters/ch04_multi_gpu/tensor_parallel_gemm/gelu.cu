// ch04:tensor_parallel_gemm — the activation between the two GEMMs, GELU's tanh form, in place on H (bf16):
// every step's and the reference's. A separate pass (read and write H once: 2 x 2 T f bytes, ~0.03 ms a rank
// at the defaults against ~0.8 ms of GEMMs), kept apart from the GEMM so that the lesson stays the
// communication; cuBLASLt's CUBLASLT_EPILOGUE_GELU would fuse it into GEMM1's epilogue (README, next steps).
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"

namespace aisp::ch04::tensor_parallel_gemm {
namespace {

// 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))) in fp32 (reference.hpp's gelu_tanh; tanhf, not the
// approximate tanh.approx.f32: the host reference holds it to a few fp32 ulps).
__device__ float gelu_tanh(float h) {
  constexpr float k_sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * h * (1.0f + tanhf(k_sqrt_2_over_pi * (h + 0.044715f * h * h * h)));
}

// Two elements a thread per iteration (4-byte loads and stores of bf16 pairs), grid-stride.
__global__ void gelu_kernel(__nv_bfloat162* __restrict__ h, std::size_t pairs) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs; i += stride) {
    const float2 v = __bfloat1622float2(h[i]);
    h[i] = __floats2bfloat162_rn(gelu_tanh(v.x), gelu_tanh(v.y));
  }
}

}  // namespace

void launch_gelu(const Args& a, bf16* h, std::size_t n, cudaStream_t stream) {
  constexpr int threads = 256;
  const std::size_t pairs = n / 2;
  gelu_kernel<<<grid_for(a, pairs, threads), threads, 0, stream>>>(reinterpret_cast<__nv_bfloat162*>(h), pairs);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch04::tensor_parallel_gemm
