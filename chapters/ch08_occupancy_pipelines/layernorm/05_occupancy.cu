// ch08:layernorm:05_occupancy — one more row in flight per SM: a register budget of 48 per thread.
//
// What changed: the same row-in-registers kernel as step 04, held to 48 registers per thread
// (__launch_bounds__(256, 5): five 256-thread blocks per SM) instead of the 53 the compiler chose, which
// round up to 56 and leave room for only four blocks (65536 / (256 x 56) = 4.6). To fit, the row's
// statistics come from two plain block sums over the registers (the mean, then the squared deviations
// from it: the exact two-pass answer, one float per reduction) instead of merging each thread's
// (n, mean, M2) triple with Chan's formula, which shuffled three floats and divided at every level.
// Why it helps: each block has its row (16 KiB at 8192 cols) in flight only between its loads and its
// reduction, so the bytes in flight per SM scale with the blocks resident on it: 5 x 16 KiB instead of
// 4 x 16 KiB, +25%. ch08:rmsnorm:04 and ch08:softmax:05 compile to 48 registers (five blocks per SM) and
// reach 93-97% of the DRAM copy ceiling where layernorm's step 04 (four blocks) stopped at 88-91%.
// The budget fits only without the per-vector bounds checks (with them ptxas spills), so it applies to
// rows that fill every thread's vectors exactly (cols = 2048, 4096 or 8192: the default and real model
// widths); other widths, and rows longer than 8192 cols, run the checked kernel with step 04's unbounded
// registers.
// Napkin math: 1.07 GB per launch as before; the bound is still the DRAM copy ceiling (~0.25 ms at
// ~4.3 TB/s on an H200); this step aims at >= 92% of it.
// Run: aisp bench run --targets ch08:layernorm:05_occupancy
#include "chapters/ch08_occupancy_pipelines/layernorm/problem.hpp"
#include "chapters/ch08_occupancy_pipelines/row_in_registers.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch08::layernorm::v05 {

constexpr int k_threads = 256;
constexpr int k_blocks_per_sm = 5;  // 65536 registers / (5 x 256 threads) = 51, allocated as 48
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// The block's sum in every thread, with one barrier: each warp reduces with shuffles and publishes its
// partial, then every warp reduces the eight partials itself (no second barrier to broadcast a result).
// Each call site passes its own shared array, so the second sum never overwrites partials that a slow
// warp of the first one has not read yet.
__device__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  return warp_sum(lane < k_threads / 32 ? partial[lane] : 0.0f);
}

// Eight bf16 in one 16-byte register quadruple, viewed as four bf16 pairs.
union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[4];
};

// k_vecs vectors per thread: vector i = threadIdx.x + k * k_threads, as in step 04. k_exact: the row is
// exactly k_vecs * k_threads vectors, so no vector needs a bounds check; only then, and up to 4 vectors
// (8192 cols), the register budget applies (the checked kernel would spill under it).
template <int k_vecs, bool k_exact>
__global__ void __launch_bounds__(k_threads, (k_exact && k_vecs <= 4) ? k_blocks_per_sm : 1)
    layernorm_occupancy_kernel(Args a) {
  __shared__ float partial_sum[k_threads / 32];
  __shared__ float partial_m2[k_threads / 32];
  const int vecs = a.cols / 8;
  const auto* in = reinterpret_cast<const uint4*>(a.x + static_cast<std::size_t>(blockIdx.x) * a.cols);
  const auto* w = reinterpret_cast<const uint4*>(a.weight);
  const auto* b = reinterpret_cast<const uint4*>(a.bias);
  auto* out = reinterpret_cast<uint4*>(a.y + static_cast<std::size_t>(blockIdx.x) * a.cols);
  Vec8 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (k_exact || i < vecs) v[k].raw = in[i];
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (k_exact || threadIdx.x + k * k_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        sum += f.x + f.y;
      }
    }
  }
  const float mean = block_sum(sum, partial_sum) / static_cast<float>(a.cols);
  // Deviations from the row's own mean: no cancellation, whatever the offset of the data.
  float m2 = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    if (k_exact || threadIdx.x + k * k_threads < vecs) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        m2 += (f.x - mean) * (f.x - mean) + (f.y - mean) * (f.y - mean);
      }
    }
  }
  const float rstd = rsqrtf(block_sum(m2, partial_m2) / static_cast<float>(a.cols) + k_eps);
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) {
    const int i = threadIdx.x + k * k_threads;
    if (k_exact || i < vecs) {
      Vec8 wv, bv;
      wv.raw = w[i];
      bv.raw = b[i];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 f = __bfloat1622float2(v[k].pair[p]);
        const float2 fw = __bfloat1622float2(wv.pair[p]);
        const float2 fb = __bfloat1622float2(bv.pair[p]);
        v[k].pair[p] = __floats2bfloat162_rn((f.x - mean) * rstd * fw.x + fb.x,
                                             (f.y - mean) * rstd * fw.y + fb.y);
      }
      out[i] = v[k].raw;
    }
  }
}

// The fewest vectors per thread that hold the row (ch08_occupancy_pipelines/row_in_registers.hpp).
int vectors_per_thread(const Args& a) {
  return ch08::row_vectors_per_thread(a.cols, k_threads, "ch08:layernorm:05_occupancy");
}

bool row_is_exact(const Args& a, int k_vecs) { return a.cols / 8 == k_vecs * k_threads; }

template <int k_vecs>
const void* kernel_for_vecs(const Args& a) {
  return row_is_exact(a, k_vecs) ? reinterpret_cast<const void*>(&layernorm_occupancy_kernel<k_vecs, true>)
                                 : reinterpret_cast<const void*>(&layernorm_occupancy_kernel<k_vecs, false>);
}

const void* kernel_for(const Args& a) {
  switch (vectors_per_thread(a)) {
    case 1: return kernel_for_vecs<1>(a);
    case 2: return kernel_for_vecs<2>(a);
    case 4: return kernel_for_vecs<4>(a);
    default: return kernel_for_vecs<8>(a);
  }
}

template <int k_vecs>
void launch_vecs(const Args& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(a.rows);
  if (row_is_exact(a, k_vecs)) {
    layernorm_occupancy_kernel<k_vecs, true><<<grid, k_threads, 0, stream>>>(a);
  } else {
    layernorm_occupancy_kernel<k_vecs, false><<<grid, k_threads, 0, stream>>>(a);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  switch (vectors_per_thread(a)) {
    case 1: launch_vecs<1>(a, stream); break;
    case 2: launch_vecs<2>(a, stream); break;
    case 4: launch_vecs<4>(a, stream); break;
    default: launch_vecs<8>(a, stream); break;
  }
  AISP_CHECK_LAUNCH();
}

// Registers per thread, spills and the occupancy they allow: the point of this step.
std::vector<Fact> facts(const Args& a) { return standard_facts(kernel_facts(kernel_for(a), k_threads)); }

AISP_REGISTER_VARIANT_WITH_FACTS(LayernormProblem, launch, facts, .step = 5, .slug = "occupancy",
                                 .kind = VariantKind::optimized,
                                 .summary = "step 04 held to 48 registers (5 blocks/SM): two block sums for the statistics");

}  // namespace aisp::ch08::layernorm::v05
