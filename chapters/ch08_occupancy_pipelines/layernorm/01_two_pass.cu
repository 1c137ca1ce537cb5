// ch08:layernorm:01_two_pass — mean, then variance, then normalize: three walks over the row (baseline).
//
// What: one block of 256 threads per row. Pass 1 sums the row for the mean; pass 2 sums the squared
// deviations from that mean for the (biased) variance; pass 3 writes (x - mean) * rstd * w + b. Each
// statistic is a warp-shuffle block reduction; loads are coalesced bf16, arithmetic fp32. This is the
// textbook, numerically safe layer norm: the variance is never formed as E[x^2] - E[x]^2, which loses
// digits when the mean is large next to the spread.
// Why it is slow: every element is loaded three times. Passes 2 and 3 reread a 16 KiB row the block just
// read, which mostly hits L1/L2, but the block waits through two reductions and three passes between its
// first load and its first store, and issues 32 two-byte loads per thread per pass.
// Napkin math: 1.07 GB of DRAM traffic per launch at 32768 x 8192 (x read once from DRAM if the rereads
// hit cache), 3x that in load instructions.
// Run: aisp bench run --targets ch08:layernorm:01_two_pass
#include "chapters/ch08_occupancy_pipelines/layernorm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::layernorm::v01 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// Each warp reduces with shuffles, warp 0 then sums the warps' partials. The block's sum in every thread.
// The trailing barrier lets a second call reuse the shared variables.
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
  const float total = result;
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(k_threads) layernorm_two_pass_kernel(Args a) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * a.cols;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < a.cols; c += k_threads) sum += __bfloat162float(a.x[base + c]);
  const float mean = block_sum(sum) / a.cols;
  float dev = 0.0f;
  for (int c = threadIdx.x; c < a.cols; c += k_threads) {
    const float d = __bfloat162float(a.x[base + c]) - mean;
    dev += d * d;
  }
  const float rstd = rsqrtf(block_sum(dev) / a.cols + k_eps);
  for (int c = threadIdx.x; c < a.cols; c += k_threads) {
    const float xhat = (__bfloat162float(a.x[base + c]) - mean) * rstd;
    a.y[base + c] = __float2bfloat16(xhat * __bfloat162float(a.weight[c]) + __bfloat162float(a.bias[c]));
  }
}

void launch(const Args& a, cudaStream_t stream) {
  layernorm_two_pass_kernel<<<a.rows, k_threads, 0, stream>>>(a);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(LayernormProblem, launch, .step = 1, .slug = "two_pass", .kind = VariantKind::baseline,
                      .summary = "block per row: mean pass, variance pass, normalize pass");

}  // namespace aisp::ch08::layernorm::v01
