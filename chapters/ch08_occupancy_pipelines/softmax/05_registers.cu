// ch08:softmax:05_registers — the row kept in registers: one read of the row, one write (optimized).
//
// What changed: each thread loads all of its vectors of the row (k_vecs x 16 bytes, up front, all in
// flight together) into registers, and both the statistics and the write pass read them from there. With
// its values in registers a thread can also afford two cheap passes over them: its exact local max first,
// then the sum of exp(x - local max) with independent exps (no per-element rescale chain); the threads'
// (max, sum) pairs then merge online in one block reduction as in step 03.
// Why it helps: the second pass no longer goes to L1/L2 (no reread, no chance of a miss to DRAM), and the
// k_vecs loads of a thread are independent and issued back to back, so each block has its whole row in
// flight at once. The row must fit: 8192 bf16 = 4 vectors per thread at 256 threads (16 registers).
// Napkin math: 1.07 GB per launch, read once and written once; the bound is the DRAM copy ceiling
// (~0.25 ms at ~4.3 TB/s). Bytes in flight: 16 KiB per block, several blocks per SM.
// Run: aisp bench run --targets ch08:softmax:05_registers
#include "chapters/ch08_occupancy_pipelines/softmax/problem.hpp"
#include "chapters/ch08_occupancy_pipelines/row_in_registers.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch08::softmax::v05 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// A partial softmax normalizer: the max of some values and the sum of exp(value - max) over them.
struct MaxSum {
  float m;
  float s;
};

__device__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: -inf - -inf would be NaN
  return {m, a.s * fast_exp(a.m - m) + b.s * fast_exp(b.m - m)};
}

__device__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.m, offset), __shfl_xor_sync(k_full_mask, v.s, offset)});
  }
  return v;
}

// Each warp merges with shuffles, warp 0 then merges the warps' partials. The block's pair in every thread.
__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum partial[k_threads / 32];
  __shared__ MaxSum result;
  v = warp_merge(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum w = threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : MaxSum{-INFINITY, 0.0f};
    w = warp_merge(w);
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

// k_vecs vectors per thread: vector i = threadIdx.x + k * k_threads. The array stays in registers because
// every index into it is a compile-time constant after unrolling.
template <int k_vecs>
__global__ void __launch_bounds__(k_threads) softmax_registers_kernel(const __nv_bfloat16* __restrict__ x,
                                                                      __nv_bfloat16* __restrict__ y,
                                                                      int cols) {
  const int vecs = cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(blockIdx.x) * cols);
  auto* out = reinterpret_cast<uint4*>(y + static_cast<std::size_t>(blockIdx.x) * cols);
  Vec8 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (i < vecs) v[k].raw = in[i];
  }
  float local_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (threadIdx.x + k * k_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        local_max = fmaxf(local_max, fmaxf(f.x, f.y));
      }
    }
  }
  float local_sum = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (threadIdx.x + k * k_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        local_sum += fast_exp(f.x - local_max) + fast_exp(f.y - local_max);
      }
    }
  }
  const MaxSum row = block_merge({local_max, local_sum});
  const float inv_sum = 1.0f / row.s;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (i < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        v[k].pair[p] =
            __floats2bfloat162_rn(fast_exp(f.x - row.m) * inv_sum, fast_exp(f.y - row.m) * inv_sum);
      }
      out[i] = v[k].raw;
    }
  }
}

// The fewest vectors per thread that hold the row (ch08_occupancy_pipelines/row_in_registers.hpp).
int vectors_per_thread(const Args& a) {
  return ch08::row_vectors_per_thread(a.cols, k_threads, "ch08:softmax:05_registers");
}

const void* kernel_for(const Args& a) {
  switch (vectors_per_thread(a)) {
    case 1: return reinterpret_cast<const void*>(&softmax_registers_kernel<1>);
    case 2: return reinterpret_cast<const void*>(&softmax_registers_kernel<2>);
    case 4: return reinterpret_cast<const void*>(&softmax_registers_kernel<4>);
    default: return reinterpret_cast<const void*>(&softmax_registers_kernel<8>);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(a.rows);
  switch (vectors_per_thread(a)) {
    case 1: softmax_registers_kernel<1><<<grid, k_threads, 0, stream>>>(a.x, a.y, a.cols); break;
    case 2: softmax_registers_kernel<2><<<grid, k_threads, 0, stream>>>(a.x, a.y, a.cols); break;
    case 4: softmax_registers_kernel<4><<<grid, k_threads, 0, stream>>>(a.x, a.y, a.cols); break;
    default: softmax_registers_kernel<8><<<grid, k_threads, 0, stream>>>(a.x, a.y, a.cols); break;
  }
  AISP_CHECK_LAUNCH();
}

// Registers per thread, spills and the occupancy they allow: what decides the bytes in flight per SM.
std::vector<Fact> facts(const Args& a) { return standard_facts(kernel_facts(kernel_for(a), k_threads)); }

AISP_REGISTER_VARIANT_WITH_FACTS(SoftmaxProblem, launch, facts, .step = 5, .slug = "registers",
                                 .kind = VariantKind::optimized,
                                 .summary = "row held in registers (16-byte vectors): x read once, y written once");

}  // namespace aisp::ch08::softmax::v05
