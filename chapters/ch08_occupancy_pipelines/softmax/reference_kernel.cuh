// ch08:softmax — the trusted device reference, in a header so that ch10:cluster_softmax (the same problem
// on longer rows) judges its steps with the same kernel. Internal linkage: each translation unit that
// includes it has its own copy.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>

#include "device/cuda_check.hpp"

namespace aisp::ch08::softmax::reference_kernel {

inline constexpr int k_ref_threads = 256;

// Block-wide reduction through shared memory, plain tree: slow and obviously right. op: 0 = max, 1 = sum.
static __device__ double reference_block_reduce(double v, double* scratch, int op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = k_ref_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const double a = scratch[threadIdx.x], b = scratch[threadIdx.x + half];
      scratch[threadIdx.x] = op == 0 ? fmax(a, b) : a + b;
    }
    __syncthreads();
  }
  const double result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// One block per row, fp64 throughout, accurate exp: the answer every step is compared with.
static __global__ void softmax_reference_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, int cols) {
  __shared__ double scratch[k_ref_threads];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  double m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += k_ref_threads) m = fmax(m, (double)__bfloat162float(x[base + c]));
  m = reference_block_reduce(m, scratch, 0);
  double sum = 0;
  for (int c = threadIdx.x; c < cols; c += k_ref_threads) sum += exp(__bfloat162float(x[base + c]) - m);
  sum = reference_block_reduce(sum, scratch, 1);
  for (int c = threadIdx.x; c < cols; c += k_ref_threads) {
    y[base + c] = __double2bfloat16(exp(__bfloat162float(x[base + c]) - m) / sum);
  }
}


// One block per row; writes ref.
static inline void launch(const __nv_bfloat16* x, __nv_bfloat16* ref, int rows, int cols, cudaStream_t stream) {
  softmax_reference_kernel<<<rows, k_ref_threads, 0, stream>>>(x, ref, cols);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch08::softmax::reference_kernel
