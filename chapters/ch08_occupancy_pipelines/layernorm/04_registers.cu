// ch08:layernorm:04_registers — the row kept in registers: one read of x, one write of y (optimized).
//
// What changed: each thread loads all of its vectors of the row (k_vecs x 16 bytes, up front, all in
// flight together) into registers; the statistics and the normalize pass both read them from there.
// With its values in registers a thread can also afford two cheap passes over them for its own mean
// and squared deviations (independent adds, no per-element divide); the threads' partial statistics
// then merge with Chan's formula in one block reduction, as in step 02.
// Weight and bias (16 KiB each, shared by every row) are still loaded in the normalize pass: they stay
// in L1/L2 for the whole launch.
// Why it helps: the normalize pass no longer rereads x from L1/L2 (no chance of a miss to DRAM), and the
// k_vecs loads of a thread are independent and issued back to back, so each block has its whole row in
// flight at once. The row must fit: 8192 bf16 = 4 vectors per thread at 256 threads (16 registers).
// Napkin math: 1.07 GB per launch, x read once and y written once; the bound is the DRAM copy ceiling
// (~0.25 ms at ~4.3 TB/s).
// Run: aisp bench run --targets ch08:layernorm:04_registers
#include "chapters/ch08_occupancy_pipelines/layernorm/problem.hpp"
#include "chapters/ch08_occupancy_pipelines/row_in_registers.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch08::layernorm::v04 {

constexpr int k_threads = 256;
constexpr unsigned k_full_mask = 0xffffffffu;

// Welford's running statistics of some values: how many, their mean, and the sum of squared deviations.
struct Stats {
  float n;
  float mean;
  float m2;
};

// Chan, Golub and LeVeque's pairwise combination of two partial statistics.
__device__ Stats merge(Stats a, Stats b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float fb = __fdividef(b.n, n);
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

__device__ Stats warp_merge(Stats v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = merge(v, {__shfl_xor_sync(k_full_mask, v.n, offset), __shfl_xor_sync(k_full_mask, v.mean, offset),
                  __shfl_xor_sync(k_full_mask, v.m2, offset)});
  }
  return v;
}

// Each warp merges with shuffles, warp 0 then merges the warps' partials. The block's triple everywhere.
__device__ Stats block_merge(Stats v) {
  __shared__ Stats partial[k_threads / 32];
  __shared__ Stats result;
  v = warp_merge(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    Stats w = threadIdx.x < k_threads / 32 ? partial[threadIdx.x] : Stats{0.0f, 0.0f, 0.0f};
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
__global__ void __launch_bounds__(k_threads) layernorm_registers_kernel(Args a) {
  const int vecs = a.cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(a.x + static_cast<std::size_t>(blockIdx.x) * a.cols);
  const auto* w = reinterpret_cast<const uint4*>(a.weight);
  const auto* b = reinterpret_cast<const uint4*>(a.bias);
  auto* out = reinterpret_cast<uint4*>(a.y + static_cast<std::size_t>(blockIdx.x) * a.cols);
  Vec8 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (i < vecs) v[k].raw = in[i];
  }
  // With the values in registers, a thread's own statistics take two cheap passes over them (its exact
  // mean, then the squared deviations from it): independent adds instead of Welford's serial chain of
  // divides. Only the merge across threads needs Chan's formula.
  float n = 0.0f, sum = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (threadIdx.x + k * k_threads < vecs) {
      n += 8.0f;
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        sum += f.x + f.y;
      }
    }
  }
  const float mean = n > 0.0f ? sum / n : 0.0f;
  float m2 = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (threadIdx.x + k * k_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        m2 += (f.x - mean) * (f.x - mean) + (f.y - mean) * (f.y - mean);
      }
    }
  }
  const Stats s{n, mean, m2};
  const Stats row = block_merge(s);
  const float rstd = rsqrtf(row.m2 / a.cols + k_eps);
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (i < vecs) {
      Vec8 wv, bv;
      wv.raw = w[i];
      bv.raw = b[i];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        const float2 fw = __bfloat1622float2(wv.pair[p]);
        const float2 fb = __bfloat1622float2(bv.pair[p]);
        v[k].pair[p] = __floats2bfloat162_rn((f.x - row.mean) * rstd * fw.x + fb.x,
                                             (f.y - row.mean) * rstd * fw.y + fb.y);
      }
      out[i] = v[k].raw;
    }
  }
}

// The fewest vectors per thread that hold the row (ch08_occupancy_pipelines/row_in_registers.hpp).
int vectors_per_thread(const Args& a) {
  return ch08::row_vectors_per_thread(a.cols, k_threads, "ch08:layernorm:04_registers");
}

const void* kernel_for(const Args& a) {
  switch (vectors_per_thread(a)) {
    case 1: return reinterpret_cast<const void*>(&layernorm_registers_kernel<1>);
    case 2: return reinterpret_cast<const void*>(&layernorm_registers_kernel<2>);
    case 4: return reinterpret_cast<const void*>(&layernorm_registers_kernel<4>);
    default: return reinterpret_cast<const void*>(&layernorm_registers_kernel<8>);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(a.rows);
  switch (vectors_per_thread(a)) {
    case 1: layernorm_registers_kernel<1><<<grid, k_threads, 0, stream>>>(a); break;
    case 2: layernorm_registers_kernel<2><<<grid, k_threads, 0, stream>>>(a); break;
    case 4: layernorm_registers_kernel<4><<<grid, k_threads, 0, stream>>>(a); break;
    default: layernorm_registers_kernel<8><<<grid, k_threads, 0, stream>>>(a); break;
  }
  AISP_CHECK_LAUNCH();
}

// Registers per thread, spills and the occupancy they allow: what decides the bytes in flight per SM.
std::vector<Fact> facts(const Args& a) { return standard_facts(kernel_facts(kernel_for(a), k_threads)); }

AISP_REGISTER_VARIANT_WITH_FACTS(LayernormProblem, launch, facts, .step = 4, .slug = "registers",
                                 .kind = VariantKind::step,
                                 .summary = "row held in registers (16-byte vectors): x read once, y written once");

}  // namespace aisp::ch08::layernorm::v04
