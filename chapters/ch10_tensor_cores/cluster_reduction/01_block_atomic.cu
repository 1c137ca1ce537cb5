// ch10:cluster_reduction:01_block_atomic — each block sums its tile, then one atomicAdd per block (the
// baseline).
//
// What: one 256-thread block per tile of 256 * items_per_thread consecutive floats. Each thread issues
// all of its items_per_thread / 4 float4 loads before the first add (coalesced: for each k the block
// reads 4 KiB in a row), sums them in a register, the warps reduce with shuffles, warp 0 adds the 8 warp
// sums, and thread 0 adds the block's sum to the result with atomicAdd. The result is zeroed on the
// stream first. This is the textbook block reduction (ch07:reduction step 03 with more work per thread)
// and already DRAM-efficient per block.
// Why it can be slow: all tiles' atomics go to one address, and atomics on one address are performed one
// after another at the L2 slice that owns it. With ~1.75 ns per atomic (ch07:reduction's measurement on
// an H200) the queue takes tiles * 1.75 ns; when that exceeds the DRAM time, the kernel runs at the
// atomic rate.
// Napkin math at n = 2^28 (1.07 GB, ~0.25 ms at the DRAM read ceiling): 4 items per thread -> 262,144
// atomics, ~0.46 ms (atomic-bound); 8 -> 131,072, ~0.23 ms (on the edge); 16 -> 65,536, ~0.11 ms, and
// fewer beyond (DRAM-bound: the queue drains while the loads stream).
// Run: aisp bench run --targets ch10:cluster_reduction:01_block_atomic
#include "chapters/ch10_tensor_cores/cluster_reduction/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::cluster_reduction::v01 {

constexpr int k_threads = k_block_threads;
constexpr int k_warps = k_threads / 32;

// After it, lane 0 holds the sum of the warp's 32 values (the other lanes hold partial sums).
__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Float4 number i of x; the one that straddles the end (i == n / 4) holds the last n % 4 values, zeros
// after them; later ones (the last tile's padding) are all zero.
__device__ float4 load_vec(const float* __restrict__ x, std::size_t i, std::size_t n) {
  const std::size_t n4 = n / 4;
  if (i < n4) return reinterpret_cast<const float4*>(x)[i];  // cudaMalloc memory is 256-byte aligned
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (i == n4) {
    const std::size_t j = 4 * i;
    if (j < n) v.x = x[j];
    if (j + 1 < n) v.y = x[j + 1];
    if (j + 2 < n) v.z = x[j + 2];
  }
  return v;
}

// The block's tile is float4s [blockIdx.x * k_threads * k_vecs, + k_threads * k_vecs); thread t takes
// float4 t + k * k_threads of it, k < k_vecs.
template <int k_items>
__global__ void __launch_bounds__(k_threads) sum_block_atomic_kernel(const float* __restrict__ x,
                                                                      float* __restrict__ out, std::size_t n) {
  constexpr int k_vecs = k_items / 4;
  __shared__ float warp_sums[k_warps];
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * (k_threads * k_vecs) + threadIdx.x;
  float4 v[k_vecs];
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) v[k] = load_vec(x, first + k * k_threads, n);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < k_vecs; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  s = warp_sum(s);
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (warp == 0) {
    const float block = warp_sum(lane < k_warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) atomicAdd(out, block);
  }
}

const void* kernel_for(int items) {
  switch (items) {
    case 4: return reinterpret_cast<const void*>(&sum_block_atomic_kernel<4>);
    case 8: return reinterpret_cast<const void*>(&sum_block_atomic_kernel<8>);
    case 16: return reinterpret_cast<const void*>(&sum_block_atomic_kernel<16>);
    case 32: return reinterpret_cast<const void*>(&sum_block_atomic_kernel<32>);
    default: return reinterpret_cast<const void*>(&sum_block_atomic_kernel<64>);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float), stream));
  const auto grid = static_cast<unsigned>(tile_count(a.n, a.items_per_thread));
  switch (a.items_per_thread) {  // problem.hpp admits only these five
    case 4: sum_block_atomic_kernel<4><<<grid, k_threads, 0, stream>>>(a.x, a.out, a.n); break;
    case 8: sum_block_atomic_kernel<8><<<grid, k_threads, 0, stream>>>(a.x, a.out, a.n); break;
    case 16: sum_block_atomic_kernel<16><<<grid, k_threads, 0, stream>>>(a.x, a.out, a.n); break;
    case 32: sum_block_atomic_kernel<32><<<grid, k_threads, 0, stream>>>(a.x, a.out, a.n); break;
    default: sum_block_atomic_kernel<64><<<grid, k_threads, 0, stream>>>(a.x, a.out, a.n); break;
  }
  AISP_CHECK_LAUNCH();
}

// Registers and occupancy, and how many atomics the result's address takes per launch.
std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> f = standard_facts(kernel_facts(kernel_for(a.items_per_thread), k_threads));
  f.push_back({"atomics", std::to_string(tile_count(a.n, a.items_per_thread))});
  return f;
}

AISP_REGISTER_VARIANT_WITH_FACTS(ClusterReductionProblem, launch, facts, .step = 1, .slug = "block_atomic",
                                 .kind = VariantKind::baseline,
                                 .summary = "block per tile: float4 loads, shuffle reduction, one atomicAdd per block");

}  // namespace aisp::ch10::cluster_reduction::v01
