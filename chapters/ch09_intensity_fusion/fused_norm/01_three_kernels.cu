// ch09:fused_norm:01_three_kernels — add, row statistics, scale: three kernels (the baseline).
//
// What: the residual add, then the RMS norm as ch08:rmsnorm's baseline splits it, each a kernel of its
// own as an unfused graph of framework operators runs them: (1) an elementwise add writes h = x +
// residual; (2) a statistics kernel, one 256-thread block per row, reads h back and writes rstd per row
// to a scratch vector; (3) an elementwise scale kernel reads h again and writes y = h * rstd * w. Every
// kernel is already competent: 16-byte vectors (8 bf16) for every load and store, coalesced, fp32 math,
// warp-shuffle block reduction. Only the fusion is missing.
// Why it is slow: h makes two extra trips through DRAM. Between the kernels the 512 MiB of h cannot stay
// in a 50 MB L2, so kernel 2 and kernel 3 each read all of it again.
// Napkin math (per element): kernel 1 moves 6 bytes, kernel 2 reads 2, kernel 3 moves 4: 12 bytes
// against the 8 declared, so at best 2/3 of the DRAM copy ceiling; at 32768 x 8192, 3.2 GB moved for
// 2.15 GB declared.
// Run: aisp bench run --targets ch09:fused_norm:01_three_kernels
#include "chapters/ch09_intensity_fusion/fused_norm/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::fused_norm::v01 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

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

// Kernel 1, elementwise over the whole matrix: one 16-byte vector per thread.
__global__ void __launch_bounds__(k_threads)
    add_kernel(const uint4* __restrict__ x, const uint4* __restrict__ residual, uint4* __restrict__ h,
               std::size_t vecs) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i >= vecs) return;
  Vec8 xv, rv;
  xv.raw = x[i];
  rv.raw = residual[i];
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 f = __bfloat1622float2(xv.pair[p]);
    const float2 g = __bfloat1622float2(rv.pair[p]);
    xv.pair[p] = __floats2bfloat162_rn(f.x + g.x, f.y + g.y);
  }
  h[i] = xv.raw;
}

// Kernel 2, one block per row: rstd = 1 / sqrt(mean(h^2) + eps).
__global__ void __launch_bounds__(k_threads)
    row_rstd_kernel(const __nv_bfloat16* __restrict__ h, int hidden, float* __restrict__ row_rstd) {
  const int vecs = hidden / 8;
  const auto* row = reinterpret_cast<const uint4*>(h + static_cast<std::size_t>(blockIdx.x) * hidden);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < vecs; i += k_threads) {
    Vec8 v;
    v.raw = row[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 f = __bfloat1622float2(v.pair[p]);
      squares += f.x * f.x + f.y * f.y;
    }
  }
  squares = block_sum(squares);
  if (threadIdx.x == 0) row_rstd[blockIdx.x] = rsqrtf(squares / hidden + k_eps);
}

// Kernel 3, elementwise over the whole matrix: vector i lies in row i / (hidden / 8).
__global__ void __launch_bounds__(k_threads)
    scale_kernel(const uint4* __restrict__ h, const float* __restrict__ row_rstd,
                 const uint4* __restrict__ weight, uint4* __restrict__ y, int row_vecs, std::size_t vecs) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i >= vecs) return;
  const float rstd = row_rstd[i / row_vecs];
  Vec8 v, wv;
  v.raw = h[i];
  wv.raw = weight[i % row_vecs];
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 f = __bfloat1622float2(v.pair[p]);
    const float2 fw = __bfloat1622float2(wv.pair[p]);
    v.pair[p] = __floats2bfloat162_rn(f.x * rstd * fw.x, f.y * rstd * fw.y);
  }
  y[i] = v.raw;
}

// The per-row rstd lives in scratch that the variant owns (made once in setup, outside timing).
class ThreeKernels {
 public:
  void setup(const Args& a, cudaStream_t) { m_row_rstd = DeviceBuffer<float>(a.tokens); }

  void launch(const Args& a, cudaStream_t stream) {
    const int row_vecs = a.hidden / 8;
    const std::size_t vecs = static_cast<std::size_t>(a.tokens) * row_vecs;
    const auto grid = static_cast<unsigned>((vecs + k_threads - 1) / k_threads);
    add_kernel<<<grid, k_threads, 0, stream>>>(reinterpret_cast<const uint4*>(a.x),
                                               reinterpret_cast<const uint4*>(a.residual),
                                               reinterpret_cast<uint4*>(a.h), vecs);
    AISP_CHECK_LAUNCH();
    row_rstd_kernel<<<a.tokens, k_threads, 0, stream>>>(a.h, a.hidden, m_row_rstd.data());
    AISP_CHECK_LAUNCH();
    scale_kernel<<<grid, k_threads, 0, stream>>>(reinterpret_cast<const uint4*>(a.h), m_row_rstd.data(),
                                                 reinterpret_cast<const uint4*>(a.weight),
                                                 reinterpret_cast<uint4*>(a.y), row_vecs, vecs);
    AISP_CHECK_LAUNCH();
  }

 private:
  DeviceBuffer<float> m_row_rstd;
};

AISP_REGISTER_STATEFUL_VARIANT(FusedNormProblem, ThreeKernels, .step = 1, .slug = "three_kernels",
                               .kind = VariantKind::baseline,
                               .summary = "add, row-statistics and scale kernels: h crosses DRAM 3 times");

}  // namespace aisp::ch09::fused_norm::v01
