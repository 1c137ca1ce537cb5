// The probe kernels of `aisp hw peaks`. Each one is the simplest kernel that saturates one unit, written
// so that its output can be checked exactly on the host (docs/ceilings.md "Probes").
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "device/cuda_check.hpp"
#include "device/probe_kernels.hpp"

namespace aisp::probe {

namespace {

constexpr std::uint32_t k_golden = 0x9E3779B1u;
constexpr int k_threads = 256;
constexpr int k_in_flight = 4;  // independent 16-byte accesses per thread per iteration (Little's law)

__device__ __forceinline__ unsigned long long mix4(const uint4& v, std::size_t q) {
  // Words 4q..4q+3 weighted by 2i+1 = 8q+1, 8q+3, 8q+5, 8q+7.
  const unsigned long long w = 8ULL * q + 1;
  return static_cast<unsigned long long>(v.x) * w + static_cast<unsigned long long>(v.y) * (w + 2) +
         static_cast<unsigned long long>(v.z) * (w + 4) + static_cast<unsigned long long>(v.w) * (w + 6);
}

// Block-wide sum of one value per thread; thread 0 writes it to partials[blockIdx.x].
__device__ void block_sum_to(unsigned long long v, unsigned long long* partials) {
  __shared__ unsigned long long warp_sums[32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0;
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) partials[blockIdx.x] = v;
  }
}

// DRAM write: the pattern, 16 bytes per store, k_in_flight stores per iteration.
__global__ void pattern_kernel(uint4* __restrict__ dst, std::size_t n4, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; q < n4; q += stride) {
    const std::uint32_t base = static_cast<std::uint32_t>(4 * q) * k_golden + seed;
    dst[q] = make_uint4(base, base + k_golden, base + 2 * k_golden, base + 3 * k_golden);
  }
}

// DRAM read: a position-weighted checksum, k_in_flight independent 16-byte loads before their use.
__global__ void checksum_kernel(const uint4* __restrict__ src, std::size_t n4, unsigned long long* partials) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  unsigned long long acc = 0;
  for (; q + (k_in_flight - 1) * stride < n4; q += k_in_flight * stride) {
    uint4 v[k_in_flight];
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) v[k] = src[q + k * stride];
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) acc += mix4(v[k], q + k * stride);
  }
  for (; q < n4; q += stride) acc += mix4(src[q], q);
  block_sum_to(acc, partials);
}

// DRAM copy: the ch07:copy ladder's best step on 16-byte words.
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (; q + (k_in_flight - 1) * stride < n4; q += k_in_flight * stride) {
    uint4 v[k_in_flight];
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) v[k] = src[q + k * stride];
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) dst[q + k * stride] = v[k];
  }
  for (; q < n4; q += stride) dst[q] = src[q];
}

// ld.global.cg caches in L2 only (PTX ISA, "Data Movement and Conversion Instructions: ld", cache
// operators): every pass then reads the L2, never an SM's L1.
__device__ __forceinline__ uint4 load_l2_only(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// L2 read: pass p reads the window of 4T vectors starting at p * step of a power-of-two working set that
// fits in L2, wrapping (T = threads in the launch; thread t reads window positions t, t+T, t+2T, t+3T).
// The window moves by a step only known at run time, so no load is loop-invariant: ptxas would otherwise
// hoist the loads of a fixed address out of the pass loop (seen: 63 TB/s "L2" on an H200, from registers).
__global__ void l2_read_kernel(const uint4* __restrict__ src, unsigned mask, unsigned step, int passes,
                               unsigned long long* partials) {
  const unsigned threads = gridDim.x * blockDim.x;
  unsigned base = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (int p = 0; p < passes; ++p, base += step) {
    uint4 v[k_in_flight];
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) v[k] = load_l2_only(src + ((base + k * threads) & mask));
#pragma unroll
    for (int k = 0; k < k_in_flight; ++k) {
      acc += static_cast<unsigned long long>(v[k].x) + v[k].y + v[k].z + v[k].w;
    }
  }
  block_sum_to(acc, partials);
}

// ld.volatile.shared.v4: a warp reads 512 contiguous bytes, four conflict-free 128-byte wavefronts (CUDA
// C++ Programming Guide, "Shared Memory" bank rules). .volatile (PTX ISA, "ld") makes ptxas perform every
// load: plain loads of the same two addresses were hoisted out of the loop (seen: 127 TB/s on an H200).
__device__ __forceinline__ uint4 load_shared(std::uint32_t addr) {
  uint4 v;
  asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

// Shared memory read: thread t reads the 16-byte words t and t + 1024 of the tile, `rounds` reads in all.
__global__ void __launch_bounds__(k_smem_threads) smem_read_kernel(std::uint32_t seed, int rounds,
                                                                   unsigned long long* partials) {
  __shared__ uint4 tile[k_smem_tile_words / 4];
  for (int j = threadIdx.x; j < k_smem_tile_words / 4; j += blockDim.x) {
    const std::uint32_t base = static_cast<std::uint32_t>(4 * j) * k_golden + seed;
    tile[j] = make_uint4(base, base + k_golden, base + 2 * k_golden, base + 3 * k_golden);
  }
  __syncthreads();
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(&tile[threadIdx.x]));
  constexpr std::uint32_t k_half = k_smem_tile_words * 4 / 2;  // bytes: the second half of the tile
  std::uint32_t acc = 0;
  for (int r = 0; r < rounds; r += 8) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = load_shared(addr + (k % 2) * k_half);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  block_sum_to(acc, partials);
}

// FMA chains: independent so that the FMA pipe, not its latency, is the limit. b slightly above 1 keeps
// every step significant (no chain settles on a fixed point that a skipped step would also reach).
template <class T>
__global__ void fma_kernel(T* out, T b, T c, int iters) {
  const int lane = threadIdx.x % 32;
  T a[k_fma_chains];
#pragma unroll
  for (int k = 0; k < k_fma_chains; ++k) a[k] = T(lane + 1) * T(1.0 / 64) + T(k) * T(1.0 / 512);
  // Unrolled so that the loop's counter and branch take few issue slots: the FMA pipe and the issue
  // port share a slot per cycle: without unrolling, 8 FMAs plus 2 loop instructions per iteration would
  // cap the rate near 80%, and any partial unrolling the compiler picks still costs a few percent.
#pragma unroll 16
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < k_fma_chains; ++k) a[k] = fma(a[k], b, c);
  }
  T s = a[0];
#pragma unroll
  for (int k = 1; k < k_fma_chains; ++k) s += a[k];
  out[blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x] = s;
}

__global__ void count_kernel(unsigned* counter) { atomicAdd(counter, 1u); }

__device__ __forceinline__ float uniform_pm1(std::size_t i, std::uint32_t seed) {
  unsigned long long x = (static_cast<unsigned long long>(i) << 32 | seed) + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) * 0x1.0p-23f - 1.0f;  // 24 random bits -> [-1, 1)
}

template <class T>
__global__ void fill_operand_kernel(T* dst, std::size_t n, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    dst[i] = T(uniform_pm1(i, seed));
  }
}

template <class T>
T host_fma_chains(int lane, T b, T c, int iters) {
  T a[k_fma_chains];
  for (int k = 0; k < k_fma_chains; ++k) a[k] = T(lane + 1) * T(1.0 / 64) + T(k) * T(1.0 / 512);
  for (int i = 0; i < iters; ++i) {
    for (int k = 0; k < k_fma_chains; ++k) a[k] = std::fma(a[k], b, c);
  }
  T s = a[0];
  for (int k = 1; k < k_fma_chains; ++k) s += a[k];
  return s;
}

// Splits [0, n) over the host's cores and adds the per-range results (mod 2^64).
template <class F>
std::uint64_t parallel_sum(std::size_t n, F&& range_sum) {
  const unsigned threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::uint64_t> part(threads, 0);
  std::vector<std::thread> pool;
  const std::size_t chunk = (n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::size_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
      part[t] = range_sum(lo, hi);
    });
  }
  std::uint64_t total = 0;
  for (unsigned t = 0; t < threads; ++t) {
    pool[t].join();
    total += part[t];
  }
  return total;
}

}  // namespace

std::uint64_t host_checksum(const std::uint32_t* words, std::size_t n) {
  return parallel_sum(n, [words](std::size_t lo, std::size_t hi) {
    std::uint64_t s = 0;
    for (std::size_t i = lo; i < hi; ++i) s += static_cast<std::uint64_t>(words[i]) * (2 * i + 1);
    return s;
  });
}

std::uint64_t expected_checksum(std::size_t n, std::uint32_t seed) {
  return parallel_sum(n, [seed](std::size_t lo, std::size_t hi) {
    std::uint64_t s = 0;
    for (std::size_t i = lo; i < hi; ++i) s += static_cast<std::uint64_t>(pattern_word(i, seed)) * (2 * i + 1);
    return s;
  });
}

int full_wave_blocks(const DeviceFacts& d, int threads) {
  return std::max(1, d.sm_count * std::max(1, d.max_threads_per_sm / threads));
}

void launch_pattern(std::uint32_t* dst, std::size_t n_words, std::uint32_t seed, const DeviceFacts& d,
                    cudaStream_t stream) {
  pattern_kernel<<<full_wave_blocks(d, k_threads), k_threads, 0, stream>>>(reinterpret_cast<uint4*>(dst),
                                                                           n_words / 4, seed);
  AISP_CHECK_LAUNCH();
}

int checksum_blocks(const DeviceFacts& d) { return full_wave_blocks(d, k_threads); }

void launch_checksum(const std::uint32_t* src, std::size_t n_words, unsigned long long* partials,
                     const DeviceFacts& d, cudaStream_t stream) {
  checksum_kernel<<<checksum_blocks(d), k_threads, 0, stream>>>(reinterpret_cast<const uint4*>(src),
                                                               n_words / 4, partials);
  AISP_CHECK_LAUNCH();
}

std::uint64_t read_partials(const unsigned long long* partials, int count, cudaStream_t stream) {
  std::vector<unsigned long long> host(static_cast<std::size_t>(count));
  AISP_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(unsigned long long),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::uint64_t total = 0;
  for (auto v : host) total += v;
  return total;
}

void launch_copy(const std::uint32_t* src, std::uint32_t* dst, std::size_t n_words, const DeviceFacts& d,
                 cudaStream_t stream) {
  copy_kernel<<<full_wave_blocks(d, k_threads), k_threads, 0, stream>>>(
      reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), n_words / 4);
  AISP_CHECK_LAUNCH();
}

std::size_t l2_probe_words(const DeviceFacts& d) {
  // The largest power of two of 16-byte vectors in half the L2: 16 MiB on an H100 (50 MB) or H200 (60 MB).
  std::size_t vectors = 1;
  while (vectors * 2 * 16 <= static_cast<std::size_t>(d.l2_bytes) / 2) vectors *= 2;
  return vectors * 4;
}

std::size_t l2_window_vectors(const DeviceFacts& d) {
  return static_cast<std::size_t>(full_wave_blocks(d, k_threads)) * k_threads * k_in_flight;
}

void launch_l2_read(const std::uint32_t* src, std::size_t n_words, unsigned step, int passes,
                    unsigned long long* partials, const DeviceFacts& d, cudaStream_t stream) {
  l2_read_kernel<<<full_wave_blocks(d, k_threads), k_threads, 0, stream>>>(
      reinterpret_cast<const uint4*>(src), static_cast<unsigned>(n_words / 4 - 1), step, passes, partials);
  AISP_CHECK_LAUNCH();
}

std::uint64_t expected_l2_sum(std::size_t n_words, std::uint32_t seed, std::size_t window_vectors, unsigned step,
                              int passes) {
  // Prefix sums of the per-vector word sums; each pass adds one circular window of them.
  const std::size_t n4 = n_words / 4;
  std::vector<std::uint64_t> prefix(n4 + 1, 0);
  for (std::size_t q = 0; q < n4; ++q) {
    std::uint64_t s = 0;
    for (int k = 0; k < 4; ++k) s += pattern_word(4 * q + k, seed);
    prefix[q + 1] = prefix[q] + s;
  }
  const std::uint64_t cycles = window_vectors / n4, rest = window_vectors % n4;
  std::uint64_t total = 0;
  unsigned base = 0;
  for (int p = 0; p < passes; ++p, base += step) {
    const std::size_t a = base & (n4 - 1);
    total += cycles * prefix[n4];
    total += a + rest <= n4 ? prefix[a + rest] - prefix[a] : (prefix[n4] - prefix[a]) + prefix[a + rest - n4];
  }
  return total;
}

int smem_blocks(const DeviceFacts& d) { return full_wave_blocks(d, k_smem_threads); }

void launch_smem_read(std::uint32_t seed, int rounds, unsigned long long* partials, const DeviceFacts& d,
                      cudaStream_t stream) {
  smem_read_kernel<<<smem_blocks(d), k_smem_threads, 0, stream>>>(seed, rounds, partials);
  AISP_CHECK_LAUNCH();
}

std::uint64_t expected_smem_partial(std::uint32_t seed, int rounds) {
  // Thread t adds words 4t..4t+3 and 4096+4t..4096+4t+3, rounds/2 times each, in 32-bit arithmetic.
  std::uint64_t total = 0;
  for (int t = 0; t < k_smem_threads; ++t) {
    std::uint32_t once = 0;
    for (int k = 0; k < 4; ++k) {
      once += pattern_word(4 * t + k, seed) + pattern_word(k_smem_tile_words / 2 + 4 * t + k, seed);
    }
    total += static_cast<std::uint32_t>(once * static_cast<std::uint32_t>(rounds / 2));
  }
  return total;
}

std::size_t fma_threads(const DeviceFacts& d) {
  return static_cast<std::size_t>(full_wave_blocks(d, k_fma_threads)) * k_fma_threads;
}

void launch_fma_f32(float* out, float b, float c, int iters, const DeviceFacts& d, cudaStream_t stream) {
  fma_kernel<float><<<full_wave_blocks(d, k_fma_threads), k_fma_threads, 0, stream>>>(out, b, c, iters);
  AISP_CHECK_LAUNCH();
}

void launch_fma_f64(double* out, double b, double c, int iters, const DeviceFacts& d, cudaStream_t stream) {
  fma_kernel<double><<<full_wave_blocks(d, k_fma_threads), k_fma_threads, 0, stream>>>(out, b, c, iters);
  AISP_CHECK_LAUNCH();
}

float expected_fma_f32(int lane, float b, float c, int iters) { return host_fma_chains(lane, b, c, iters); }
double expected_fma_f64(int lane, double b, double c, int iters) { return host_fma_chains(lane, b, c, iters); }

void launch_count(unsigned* counter, cudaStream_t stream) {
  count_kernel<<<1, 1, 0, stream>>>(counter);
  AISP_CHECK_LAUNCH();
}

void launch_fill_operand(void* dst, std::size_t n, Operand type, std::uint32_t seed, cudaStream_t stream) {
  constexpr int threads = 256;
  const int blocks = static_cast<int>(std::min<std::size_t>((n + threads - 1) / threads, 65536));
  switch (type) {
    case Operand::f32:
      fill_operand_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(dst), n, seed);
      break;
    case Operand::f16:
      fill_operand_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), n, seed);
      break;
    case Operand::bf16:
      fill_operand_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed);
      break;
    case Operand::e4m3:
      fill_operand_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(dst), n, seed);
      break;
  }
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::probe
