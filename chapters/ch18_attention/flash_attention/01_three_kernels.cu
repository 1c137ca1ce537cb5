// ch18:flash_attention:01_three_kernels — attention as written from its definition (the baseline).
//
// What: three launches, each the competent tool for its job. (1) S = scale * Q K^T by a cuBLAS
// strided-batched GEMM, bf16 in, fp32 accumulate, written as fp32: the whole s x s score matrix of every
// head goes to DRAM. (2) A row softmax kernel, one block per score row: one pass finds the row's max and
// sum together (online softmax, ch08), a second pass (the row is L1/L2-hot) writes P = exp(s - m) / l
// rounded to bf16, zero where the causal mask hides a key. (3) O = P V by a second GEMM, bf16 in, fp32
// accumulate, bf16 out. This is the framework's "math" path (PyTorch's SDPA fallback) with one
// deliberate difference: S stays fp32 where PyTorch writes it in the input dtype (bf16), because a bf16 S
// would round every score by up to 2^-9 of itself before the exp, a precision downgrade the fused steps
// do not make; with fp32 S all variants compute the same thing (fp32 scores, P rounded to bf16 for the
// second GEMM) under one tolerance. Scratch (S fp32, P bf16) is allocated once in setup.
// GQA: the group query heads of one K/V head are consecutive in Q, so they are one (group * seq) x d
// matrix; both GEMMs are batched over the batch * kv_heads K/V heads with plain strides.
// Why it is slow: S and P are 6 bytes per (query, key) pair of DRAM traffic, written and read once each:
// b * h * s^2 * 12 bytes = 25.8 GB at b4 h32 s4096, against 0.5 GB for Q, K, V and O. The causal mask
// saves nothing: both GEMMs still compute (and the softmax still reads) every masked pair.
// Napkin math: 25.8 GB at ~4.3 TB/s (H200) = 6 ms, ~8.5 ms on an H100 (3.0 TB/s); the GEMMs' 1.1 TFLOP
// add ~1.5 ms at cuBLAS's ~750 TFLOP/s. Expect ~7.5 ms, ~150 TFLOP/s, against cuDNN's 1.6 ms (~680).
// Memory: 12.9 GB of scratch at the default size (s^2 grows fast: 51 GB at s = 8192).
// Run: aisp bench run --targets ch18:flash_attention:01_three_kernels
#include <cublas_v2.h>

#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch18::flash_attention::v01 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// A running (max, sum of exp(x - max)) pair, merged as online softmax does (Milakov & Gimelshein 2018).
struct MaxSum {
  float m;
  float l;
};

__device__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: no exp(-inf - -inf)
  return {m, a.l * __expf(a.m - m) + b.l * __expf(b.m - m)};
}

__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum partial[k_threads / 32];
  __shared__ MaxSum result;
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.m, offset), __shfl_xor_sync(k_full_mask, v.l, offset)});
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum r = partial[0];
    for (int w = 1; w < k_threads / 32; ++w) r = merge(r, partial[w]);
    result = r;
  }
  __syncthreads();
  return result;
}

// Row blockIdx.x of S (fp32) -> row of P (bf16). The row's query index is row % seq; with the causal
// mask it sees keys 0..query.
__global__ void __launch_bounds__(k_threads)
    softmax_rows_kernel(const float* __restrict__ s, __nv_bfloat16* __restrict__ p, int seq, bool causal) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * seq;
  const int keys = causal ? static_cast<int>(blockIdx.x % seq) + 1 : seq;
  MaxSum mine{-INFINITY, 0.0f};
  for (int j = threadIdx.x; j < keys; j += k_threads) mine = merge(mine, {s[base + j], 1.0f});
  const MaxSum row = block_merge(mine);
  const float inv_l = 1.0f / row.l;
  for (int j = threadIdx.x; j < seq; j += k_threads) {
    p[base + j] = __float2bfloat16(j < keys ? __expf(s[base + j] - row.m) * inv_l : 0.0f);
  }
}

class ThreeKernels {
 public:
  void setup(const Args& a, cudaStream_t) {
    const std::size_t scores = static_cast<std::size_t>(a.batch) * a.heads * a.seq * a.seq;
    m_s = DeviceBuffer<float>(scores);
    m_p = DeviceBuffer<__nv_bfloat16>(scores);
    AISP_CUBLAS_CHECK(cublasCreate(&m_handle));
  }
  ThreeKernels() = default;
  ThreeKernels(const ThreeKernels&) = delete;
  ThreeKernels& operator=(const ThreeKernels&) = delete;
  ~ThreeKernels() {
    if (m_handle) cublasDestroy(m_handle);
  }

  // Row-major X (r x c) is column-major X^T (c x r): cuBLAS computes S^T = K Q^T and O^T = V^T P^T.
  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUBLAS_CHECK(cublasSetStream(m_handle, stream));
    const long long s = a.seq, d = a.head_dim, g = a.heads / a.kv_heads;
    const int rows = static_cast<int>(g * s);  // query rows per K/V head
    const int kv_heads = a.batch * a.kv_heads;
    const float scale = a.scale, one = 1.0f, zero = 0.0f;
    AISP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        m_handle, CUBLAS_OP_T, CUBLAS_OP_N, a.seq, rows, a.head_dim, &scale, a.k, CUDA_R_16BF, a.head_dim,
        s * d, a.q, CUDA_R_16BF, a.head_dim, g * s * d, &zero, m_s.data(), CUDA_R_32F, a.seq, g * s * s,
        kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const auto score_rows = static_cast<unsigned>(static_cast<long long>(a.batch) * a.heads * s);
    softmax_rows_kernel<<<score_rows, k_threads, 0, stream>>>(m_s.data(), m_p.data(), a.seq, a.causal);
    AISP_CHECK_LAUNCH();
    AISP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        m_handle, CUBLAS_OP_N, CUBLAS_OP_N, a.head_dim, rows, a.seq, &one, a.v, CUDA_R_16BF, a.head_dim,
        s * d, m_p.data(), CUDA_R_16BF, a.seq, g * s * s, &zero, a.o, CUDA_R_16BF, a.head_dim, g * s * d,
        kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  DeviceBuffer<float> m_s;
  DeviceBuffer<__nv_bfloat16> m_p;
  cublasHandle_t m_handle = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(FlashAttentionProblem, ThreeKernels, .step = 1, .slug = "three_kernels",
                               .kind = VariantKind::baseline,
                               .summary =
                                   "cuBLAS Q K^T -> fp32 S in DRAM, softmax kernel -> bf16 P, "
                                   "cuBLAS P V");

}  // namespace aisp::ch18::flash_attention::v01
