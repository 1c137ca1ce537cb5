// ch08:rmsnorm:01_two_kernels — a statistics kernel, then a normalize kernel (the baseline).
//
// What: two kernels, each one block of 256 threads per row. The first sums each row's squares (coalesced
// bf16 loads, fp32, a warp-shuffle block reduction) and writes rstd = 1 / sqrt(mean(x^2) + eps) to a
// scratch vector; the second reads it back and writes y = x * rstd * w. This is the obvious split of
// "reduce, then map", and what an unfused graph of framework operators does.
// Why it is slow: the input goes through DRAM twice. Between the two kernels the 512 MiB of x cannot
// stay in a 50 MB L2, so the second kernel reads all of it again.
// Napkin math: at 32768 x 8192, x is 0.54 GB: two reads + one write = 1.61 GB of DRAM traffic for the
// 1.07 GB declared. Expect at most ~67% of the DRAM copy ceiling.
// Run: aisp bench run --targets ch08:rmsnorm:01_two_kernels
#include "chapters/ch08_occupancy_pipelines/rmsnorm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::rmsnorm::v01 {

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

__global__ void __launch_bounds__(k_threads) row_rstd_kernel(Args a, float* __restrict__ row_rstd) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * a.cols;
  float squares = 0.0f;
  for (int c = threadIdx.x; c < a.cols; c += k_threads) {
    const float v = __bfloat162float(a.x[base + c]);
    squares += v * v;
  }
  squares = block_sum(squares);
  if (threadIdx.x == 0) row_rstd[blockIdx.x] = rsqrtf(squares / a.cols + k_eps);
}

__global__ void __launch_bounds__(k_threads) normalize_kernel(Args a, const float* __restrict__ row_rstd) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * a.cols;
  const float rstd = row_rstd[blockIdx.x];
  for (int c = threadIdx.x; c < a.cols; c += k_threads) {
    a.y[base + c] = __float2bfloat16(__bfloat162float(a.x[base + c]) * rstd * __bfloat162float(a.weight[c]));
  }
}

// The per-row rstd lives in scratch that the variant owns (made once in setup, outside timing).
class TwoKernels {
 public:
  void setup(const Args& a, cudaStream_t) { m_row_rstd = DeviceBuffer<float>(a.rows); }

  void launch(const Args& a, cudaStream_t stream) {
    row_rstd_kernel<<<a.rows, k_threads, 0, stream>>>(a, m_row_rstd.data());
    AISP_CHECK_LAUNCH();
    normalize_kernel<<<a.rows, k_threads, 0, stream>>>(a, m_row_rstd.data());
    AISP_CHECK_LAUNCH();
  }

 private:
  DeviceBuffer<float> m_row_rstd;
};

AISP_REGISTER_STATEFUL_VARIANT(RmsnormProblem, TwoKernels, .step = 1, .slug = "two_kernels",
                               .kind = VariantKind::baseline,
                               .summary = "sum-of-squares kernel, then normalize kernel: x read 2x from DRAM");

}  // namespace aisp::ch08::rmsnorm::v01
