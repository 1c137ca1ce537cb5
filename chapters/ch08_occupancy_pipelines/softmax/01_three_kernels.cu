// ch08:softmax:01_three_kernels — the textbook pipeline: row max, row sum, normalize (the baseline).
//
// What: three kernels, each one block of 256 threads per row. The first writes every row's max to a
// scratch vector, the second every row's sum of exp(x - max), the third reads both back and writes
// y = exp(x - max) / sum. Each is the obvious kernel for its job: coalesced bf16 loads, a warp-shuffle
// block reduction, fp32 arithmetic. This is how softmax is first written from its definition, and how
// an unfused framework graph runs it.
// Why it is slow: the whole input goes through DRAM three times. Between two kernels the 512 MiB input
// cannot stay in a 50 MB L2, so each kernel reads it again from DRAM.
// Napkin math: at the default 32768 x 8192, x is 0.54 GB: three reads + one write = 2.15 GB of DRAM
// traffic for the 1.07 GB declared. Expect at most ~50% of the DRAM copy ceiling.
// Run: aisp bench run --targets ch08:softmax:01_three_kernels
#include "chapters/ch08_occupancy_pipelines/softmax/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::softmax::v01 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// Each warp reduces with shuffles, warp 0's lanes then combine the warps' partials from shared memory.
// Returns the block's result in every thread.
template <bool is_max>
__device__ float block_reduce(float v) {
  __shared__ float partial[k_threads / 32];
  __shared__ float result;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : (is_max ? -INFINITY : 0.0f);
    w = is_max ? warp_max(w) : warp_sum(w);
    if (threadIdx.x == 0) result = w;
  }
  __syncthreads();
  return result;
}

__global__ void __launch_bounds__(k_threads) row_max_kernel(const __nv_bfloat16* __restrict__ x,
                                                            float* __restrict__ row_max, int cols) {
  const __nv_bfloat16* row = x + static_cast<std::size_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += k_threads) m = fmaxf(m, __bfloat162float(row[c]));
  m = block_reduce<true>(m);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void __launch_bounds__(k_threads) row_sum_kernel(const __nv_bfloat16* __restrict__ x,
                                                            const float* __restrict__ row_max,
                                                            float* __restrict__ row_sum, int cols) {
  const __nv_bfloat16* row = x + static_cast<std::size_t>(blockIdx.x) * cols;
  const float m = row_max[blockIdx.x];
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += k_threads) s += fast_exp(__bfloat162float(row[c]) - m);
  s = block_reduce<false>(s);
  if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

__global__ void __launch_bounds__(k_threads) normalize_kernel(const __nv_bfloat16* __restrict__ x,
                                                              const float* __restrict__ row_max,
                                                              const float* __restrict__ row_sum,
                                                              __nv_bfloat16* __restrict__ y, int cols) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const float m = row_max[blockIdx.x];
  const float inv_sum = 1.0f / row_sum[blockIdx.x];
  for (int c = threadIdx.x; c < cols; c += k_threads) {
    y[base + c] = __float2bfloat16(fast_exp(__bfloat162float(x[base + c]) - m) * inv_sum);
  }
}

// The per-row max and sum live in scratch that the variant owns (made once in setup, outside timing).
class ThreeKernels {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_row_max = DeviceBuffer<float>(a.rows);
    m_row_sum = DeviceBuffer<float>(a.rows);
  }

  void launch(const Args& a, cudaStream_t stream) {
    row_max_kernel<<<a.rows, k_threads, 0, stream>>>(a.x, m_row_max.data(), a.cols);
    AISP_CHECK_LAUNCH();
    row_sum_kernel<<<a.rows, k_threads, 0, stream>>>(a.x, m_row_max.data(), m_row_sum.data(), a.cols);
    AISP_CHECK_LAUNCH();
    normalize_kernel<<<a.rows, k_threads, 0, stream>>>(a.x, m_row_max.data(), m_row_sum.data(), a.y,
                                                       a.cols);
    AISP_CHECK_LAUNCH();
  }

 private:
  DeviceBuffer<float> m_row_max;
  DeviceBuffer<float> m_row_sum;
};

AISP_REGISTER_STATEFUL_VARIANT(SoftmaxProblem, ThreeKernels, .step = 1, .slug = "three_kernels",
                               .kind = VariantKind::baseline,
                               .summary = "max kernel, sum kernel, normalize kernel: x read 3x from DRAM");

}  // namespace aisp::ch08::softmax::v01
