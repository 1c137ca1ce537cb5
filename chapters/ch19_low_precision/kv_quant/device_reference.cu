// ch19:kv_quant — the trusted device reference and the FP8 quantizer of generate(). Deliberately plain:
// one thread per score, the probabilities in global memory, every cache element dequantized on its own
// (decode(code) * scale, as reference.hpp's dequantize_cache). Right, not fast; the host reference
// checks it, and the quantizer's codes and scales bit for bit, at the test size.
#include <cuda_fp8.h>

#include "chapters/ch19_low_precision/kv_quant/problem.hpp"

namespace aisp::ch19::kv_quant {
namespace {

constexpr int k_ref_threads = 256;
constexpr int k_amax_threads = 1024;

// The value of one cache element as the attention reads it.
__device__ float dequant(__nv_bfloat16 x, float) { return __bfloat162float(x); }
__device__ float dequant(__nv_fp8_e4m3 x, float scale) { return static_cast<float>(x) * scale; }

template <class T>
__device__ float block_scale(const float* scales, int block) {
  if constexpr (is_fp8<T>) {
    return scales[block];
  } else {
    return 1.0f;
  }
}

// scores[(b * heads + h) * context + t] = q[b][h] . k_t / sqrt(head_dim), one thread per score.
template <class T>
__global__ void reference_scores_kernel(const Args a, float* scores) {
  const std::int64_t n = static_cast<std::int64_t>(a.batch) * k_heads * a.context;
  const T* k = static_cast<const T*>(a.k);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(i % a.context);
    const std::int64_t bh = i / a.context;  // b * heads + h
    const int blk = static_cast<int>(bh / k_group);  // b * kv_heads + h / group
    const float scale = block_scale<T>(a.k_scale, blk);
    const __nv_bfloat16* qh = a.q + bh * k_head_dim;
    const T* kt = k + (static_cast<std::int64_t>(blk) * a.context + t) * k_head_dim;
    float dot = 0.0f;
    for (int d = 0; d < k_head_dim; ++d) dot = fmaf(__bfloat162float(qh[d]), dequant(kt[d], scale), dot);
    scores[i] = dot * a.softmax_scale;
  }
}

// Block-wide reduction through shared memory, plain tree. op: 0 = max, 1 = sum.
template <int threads>
__device__ float block_reduce(float v, float* scratch, int op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float x = scratch[threadIdx.x], y = scratch[threadIdx.x + half];
      scratch[threadIdx.x] = op == 0 ? fmaxf(x, y) : x + y;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// One block per (sequence, head): its row of scores becomes its row of probabilities, in place.
__global__ void reference_softmax_kernel(const Args a, float* scores) {
  __shared__ float scratch[k_ref_threads];
  float* row = scores + static_cast<std::int64_t>(blockIdx.x) * a.context;
  float m = -INFINITY;
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) m = fmaxf(m, row[t]);
  m = block_reduce<k_ref_threads>(m, scratch, 0);
  float sum = 0.0f;
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) sum += expf(row[t] - m);
  sum = block_reduce<k_ref_threads>(sum, scratch, 1);
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) row[t] = expf(row[t] - m) / sum;
}

// One block per (sequence, head), one thread per output value: sum_t p_t v_t[d], rounded to bf16 once.
template <class T>
__global__ void reference_output_kernel(const Args a, const float* probs, __nv_bfloat16* ref,
                                        float* ref_f32) {
  const int blk = blockIdx.x / k_group;  // b * kv_heads + h / group
  const float scale = block_scale<T>(a.v_scale, blk);
  const T* v = static_cast<const T*>(a.v) + static_cast<std::int64_t>(blk) * a.context * k_head_dim +
               threadIdx.x;
  const float* p = probs + static_cast<std::int64_t>(blockIdx.x) * a.context;
  float o = 0.0f;
#pragma unroll 8
  for (int t = 0; t < a.context; ++t) {
    o = fmaf(p[t], dequant(v[static_cast<std::int64_t>(t) * k_head_dim], scale), o);
  }
  const std::int64_t at = static_cast<std::int64_t>(blockIdx.x) * k_head_dim + threadIdx.x;
  ref[at] = __float2bfloat16(o);
  ref_f32[at] = o;
}

// One block per quantization block: scales[blk] = amax / 448, or 1 for an all-zero block (quant.hpp's
// quant_scale; the division is IEEE round-to-nearest, as on the host).
__global__ void __launch_bounds__(k_amax_threads)
    block_scale_kernel(const __nv_bfloat16* src, std::int64_t block_elems, float* scales) {
  __shared__ float scratch[k_amax_threads];
  const __nv_bfloat16* x = src + static_cast<std::int64_t>(blockIdx.x) * block_elems;
  float amax = 0.0f;
  for (std::int64_t i = threadIdx.x; i < block_elems; i += k_amax_threads) {
    amax = fmaxf(amax, fabsf(__bfloat162float(x[i])));
  }
  amax = block_reduce<k_amax_threads>(amax, scratch, 0);
  if (threadIdx.x == 0) scales[blockIdx.x] = amax > 0.0f ? amax / ch19::k_e4m3_max : 1.0f;
}

// codes[i] = e4m3(x / scale): round to nearest even, magnitudes past 448 saturate (PTX ISA "cvt":
// .satfinite), exactly quant.hpp's e4m3_encode.
__global__ void encode_kernel(const __nv_bfloat16* src, std::int64_t n, std::int64_t block_elems,
                              const float* scales, std::uint8_t* codes) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = __bfloat162float(src[i]) / scales[i / block_elems];
    codes[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  }
}

}  // namespace

void launch_reference(const Args& a, float* scores, __nv_bfloat16* ref, float* ref_f32,
                      cudaStream_t stream) {
  const int pairs = a.batch * k_heads;
  with_format(a, [&]<class T>() {
    reference_scores_kernel<T><<<a.sm_count * 8, 256, 0, stream>>>(a, scores);
    AISP_CHECK_LAUNCH();
    reference_softmax_kernel<<<pairs, k_ref_threads, 0, stream>>>(a, scores);
    AISP_CHECK_LAUNCH();
    reference_output_kernel<T><<<pairs, k_head_dim, 0, stream>>>(a, scores, ref, ref_f32);
    AISP_CHECK_LAUNCH();
  });
}

void quantize_blocks(const __nv_bfloat16* src, std::int64_t blocks, std::int64_t block_elems,
                     std::uint8_t* codes, float* scales, int sm_count, cudaStream_t stream) {
  block_scale_kernel<<<static_cast<unsigned>(blocks), k_amax_threads, 0, stream>>>(src, block_elems,
                                                                                  scales);
  AISP_CHECK_LAUNCH();
  encode_kernel<<<sm_count * 8, 256, 0, stream>>>(src, blocks * block_elems, block_elems, scales, codes);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch19::kv_quant
