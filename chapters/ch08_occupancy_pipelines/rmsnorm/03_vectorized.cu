// ch08:rmsnorm:03_vectorized — 16-byte loads and stores: eight bf16 per instruction.
//
// What changed: x, weight and y move as uint4 vectors of eight bf16 (the row length is a multiple of 8,
// so every row and vector is 16-byte aligned: enforced in problem.hpp). Thread t takes vectors t,
// t + 256, ... in both walks over the row.
// Why it helps: a warp moves 512 contiguous bytes per load instruction instead of 64, so the row needs an
// eighth of the load/store instructions and each outstanding load carries 16 bytes instead of 2: more
// bytes in flight per SM for the same number of warps (ch07:copy, step 03).
// Napkin math: the same 1.07 GB; a 16 KiB row is 4 vector loads per thread and walk instead of 32.
// Run: aisp bench run --targets ch08:rmsnorm:03_vectorized
#include "chapters/ch08_occupancy_pipelines/rmsnorm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::rmsnorm::v03 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// Each warp reduces with shuffles, warp 0 then sums the warps' partials. The block's sum in every thread.
__device__ float block_sum(float v) {
  __shared__ float partial[k_threads / 32];
  __shared__ float result;
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    const float w = warp_sum(threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) result = w;
  }
  __syncthreads();
  return result;
}

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

__global__ void __launch_bounds__(k_threads) rmsnorm_vectorized_kernel(Args a) {
  const int vecs = a.cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(a.x + static_cast<std::size_t>(blockIdx.x) * a.cols);
  const auto* w = reinterpret_cast<const uint4*>(a.weight);
  auto* out = reinterpret_cast<uint4*>(a.y + static_cast<std::size_t>(blockIdx.x) * a.cols);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v;
    v.raw = in[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      squares += f.x * f.x + f.y * f.y;
    }
  }
  const float rstd = rsqrtf(block_sum(squares) / a.cols + k_eps);
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v, wv;
    v.raw = in[i];
    wv.raw = w[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      const float2 fw = __bfloat1622float2(wv.pair[p]);
      v.pair[p] = __floats2bfloat162_rn(f.x * rstd * fw.x, f.y * rstd * fw.y);
    }
    out[i] = v.raw;
  }
}

void launch(const Args& a, cudaStream_t stream) {
  rmsnorm_vectorized_kernel<<<a.rows, k_threads, 0, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(RmsnormProblem, launch, .step = 3, .slug = "vectorized", .kind = VariantKind::step,
                      .summary = "16-byte vectors (8 bf16) for x, weight and y");

}  // namespace aisp::ch08::rmsnorm::v03
