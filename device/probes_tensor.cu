// The wgmma probe kernel of the tensor ceilings (device/probes_tensor.hpp says what it computes).
//
// Why a kernel of our own: a ceiling is the hardware's. The cuBLASLt GEMM that measured `tensor_*` before
// also moves its operands from DRAM through TMA and shares the power budget with that traffic; a GEMM
// could then read over "100% of ceiling". This kernel loads its small tiles into shared memory once and
// then only issues wgmma.mma_async, so the rate is bounded by the tensor cores (and the power and clock
// they run at), not by memory.
//
// Design, per SM: one CTA of k_wgmma_warpgroups (2) warpgroups. Each warpgroup issues m64n256 wgmma with
// both operands read from shared memory through matrix descriptors (A: its own 64 rows, B: 256 rows shared
// by the warpgroups), the shape and the operand path of Hopper's fastest GEMMs (cuBLAS's sm90 kernels,
// CUTLASS's warp-specialized mainloops, ch10:hgemm steps 04-07). A from registers would save the A reads
// from shared memory, but those are 1/5 of an m64n256 wgmma's operand bytes (2 KiB of A, 8 KiB of B in
// every type): 10 KiB per 128 clocks is ~80 B/clk, under the 128 B/clk/SM that shared memory delivers,
// so the rate should not depend on it, and the shared-memory path is the one real GEMMs use.
// One wgmma of m64n256 occupies the SM's 4 tensor cores for 128 clocks in every type (16x256x16 bf16 per
// tensor core at 1024 FLOP/clk, k32 fp8 at 2048, k8 tf32 at 512). A pass is 4 of them (the 4 K slices of
// a 128-byte row), committed as one group; each warpgroup waits only for the group before the last
// (wgmma.wait_group 1), so 2 groups = 8 wgmma = 1024 tensor-core clocks per warpgroup stay queued, and the
// other warpgroup's queue covers the issue gap when one returns from its wait. With 128 fp32 accumulators
// per thread, two warpgroups fit the register file with room to spare (ptxas: 255 registers, no spills);
// three would fit at 168 registers, more slack than two queued groups each should need.
//
// Data: the tiles hold uniform random values in [-1, 1) rounded to the type (launch_fill_operand), not
// zeros or constants. Multiplier power depends on how many operand bits toggle: zeros draw far less power,
// so under the board's power limit they would hold a higher clock and report a rate that no GEMM on real
// data can reach. Random mantissas are what real GEMMs feed the tensor cores.
//
// PTX ISA (9.0) sections cited: "Warpgroup Level Matrix Multiply-Accumulate Instructions" —
// "wgmma.mma_async" (shapes m64nNk16 for .f16/.bf16, m64nNk8 for .tf32, m64nNk32 for .e4m3; scale-d;
// imm-scale-a/b; imm-trans-a/b only for .f16/.bf16), "Matrix Descriptor Format" (start address >> 4 in
// bits 0-13, leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, base offset in 49-51,
// swizzle mode in 62-63), "Shared Memory Matrix Layout" (K-major, 128-byte swizzle: 8 rows x 128 B atoms),
// "Register Fragments and Shared Memory Matrix Layouts: Matrix D" (the accumulator layout read in the
// epilogue), "wgmma.fence" (orders register and shared-memory accesses before wgmma; not needed between
// wgmma of one shape accumulating into the same registers), "wgmma.commit_group" and "wgmma.wait_group";
// "Memory Consistency Model: Proxies" and "membar/fence: fence.proxy.async" (shared memory written by
// st.shared must be fenced before wgmma, which reads it through the async proxy).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/probes_tensor.hpp"

namespace aisp::probe {

namespace {

constexpr int k_threads = k_wgmma_warpgroups * 128;
// The tiles, plus 1024 bytes to align them: the 128-byte swizzle repeats every 1024 bytes and the
// descriptors below say base offset 0, so each tile must start 1024-aligned.
constexpr int k_smem_bytes = static_cast<int>(k_wgmma_tile_bytes) + 1024;
static_assert(k_wgmma_row_bytes == 128 && k_wgmma_slices == 4, "one 128-byte swizzle row, 32 bytes per wgmma");
static_assert(k_wgmma_m * k_wgmma_row_bytes % 1024 == 0, "each warpgroup's A rows start 1024-aligned");

__host__ __device__ inline float checksum_weight(int row, int col) {
  return 1.0f + static_cast<float>((row * 5 + col * 3) & 15) * 0.0625f;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ inline unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Descriptor of a K-major tile with 128-byte rows in the 128-byte swizzle: leading byte offset unused for
// swizzled K-major layouts (1), stride byte offset 1024 B between 8-row atoms, swizzle mode 1 (128 B).
// The next 32 bytes of K (the next wgmma's slice) are start address + 32, i.e. descriptor + 2: the
// hardware applies the swizzle to the address it forms.
__device__ inline std::uint64_t smem_desc(const void* tile) {
  const std::uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFFULL) >> 4) | (1ULL << 16) | ((1024ULL >> 4) << 32) | (1ULL << 62);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are pending.
template <int N>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The 128 fp32 accumulators of a m64n256 fragment: PTX operands %0 .. %127, then the two descriptors
// (%128, %129) and scale-d (%130).
#define AISP_WGMMA_D_REGS                                                                              \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                             \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                    \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                    \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                    \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "        \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define AISP_WGMMA_F4(i) "+f"(d[i]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define AISP_WGMMA_F16(i) AISP_WGMMA_F4(i), AISP_WGMMA_F4((i) + 4), AISP_WGMMA_F4((i) + 8), AISP_WGMMA_F4((i) + 12)
#define AISP_WGMMA_D_OPERANDS                                                                          \
  AISP_WGMMA_F16(0), AISP_WGMMA_F16(16), AISP_WGMMA_F16(32), AISP_WGMMA_F16(48), AISP_WGMMA_F16(64),   \
      AISP_WGMMA_F16(80), AISP_WGMMA_F16(96), AISP_WGMMA_F16(112)
// d (+)= A * B^T with both operands from shared memory; `imms` are imm-scale-a, imm-scale-b (1: no
// negation) and, for .f16/.bf16 only, imm-trans-a, imm-trans-b (0: K-major as stored).
#define AISP_WGMMA_SS(instruction, imms)                                                               \
  asm volatile("{ .reg .pred p;\n"                                                                     \
               "setp.ne.b32 p, %130, 0;\n" instruction " {" AISP_WGMMA_D_REGS "}, %128, %129, p, " imms \
               "; }"                                                                                   \
               : AISP_WGMMA_D_OPERANDS                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(ScaleD))

// One m64n256 wgmma of the type's K. ScaleD = 0 starts a new sum (d = A * B^T), as the first K step of a
// GEMM tile does.
template <Operand T, int ScaleD>
__device__ __forceinline__ void wgmma_ss(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b) {
  if constexpr (T == Operand::bf16) {
    AISP_WGMMA_SS("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "1, 1, 0, 0");
  } else if constexpr (T == Operand::f16) {
    AISP_WGMMA_SS("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "1, 1, 0, 0");
  } else if constexpr (T == Operand::f32) {
    AISP_WGMMA_SS("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", "1, 1");
  } else {
    AISP_WGMMA_SS("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", "1, 1");
  }
}

#undef AISP_WGMMA_SS
#undef AISP_WGMMA_D_OPERANDS
#undef AISP_WGMMA_F16
#undef AISP_WGMMA_F4
#undef AISP_WGMMA_D_REGS

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Each round: k_wgmma_passes passes over the 4 K slices of the tiles, accumulating (the first wgmma of
// the round starts from zero), so every round computes D = passes x A * B^T again and the accumulators
// stay at the magnitude of a GEMM of that K: fp8's limited accumulation precision never sees a sum
// grown over thousands of rounds. The rounds only repeat the work, so the launch lasts long enough for
// clocks and power to be those of sustained tensor work.
template <Operand T>
__global__ void __launch_bounds__(k_threads, 1)
    wgmma_probe_kernel(const uint4* __restrict__ tiles, int rounds, float* __restrict__ sums,
                       float* __restrict__ tile_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char raw[];
  // Aligned by an offset from `raw`, so that the stores below stay st.shared (not generic stores).
  unsigned char* smem = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
  // Once per CTA, the only global-memory reads: 16-byte chunk c of tile row r goes to chunk c ^ (r % 8)
  // of that row, the 128-byte swizzle (as TMA's CU_TENSOR_MAP_SWIZZLE_128B writes it), so that the
  // 8 rows of an atom read by one wgmma phase fall in different banks.
  constexpr unsigned chunks = (k_wgmma_a_rows + k_wgmma_b_rows) * (k_wgmma_row_bytes / 16);
  for (unsigned i = threadIdx.x; i < chunks; i += k_threads) {
    const unsigned row = i / 8, c = i % 8;
    *reinterpret_cast<uint4*>(smem + row * k_wgmma_row_bytes + ((c ^ (row % 8)) * 16)) = tiles[i];
  }
  // st.shared is the generic proxy, wgmma reads through the async proxy: fence, then the barrier.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const int wg = threadIdx.x / 128;
  const std::uint64_t desc_a = smem_desc(smem + wg * k_wgmma_m * k_wgmma_row_bytes);
  const std::uint64_t desc_b = smem_desc(smem + k_wgmma_a_rows * k_wgmma_row_bytes);
  float d[128];
#pragma unroll
  for (int j = 0; j < 128; ++j) d[j] = 0.0f;  // defined values; the first wgmma (scale-d 0) ignores them
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int p = 0; p < k_wgmma_passes; ++p) {
      // Orders the registers' earlier accesses (the zeroing, the previous round) before the wgmma.
      wgmma_fence();
      if (p == 0) {
        wgmma_ss<T, 0>(d, desc_a, desc_b);
      } else {
        wgmma_ss<T, 1>(d, desc_a, desc_b);
      }
#pragma unroll
      for (int s = 1; s < k_wgmma_slices; ++s) wgmma_ss<T, 1>(d, desc_a + 2 * s, desc_b + 2 * s);
      wgmma_commit();
      wgmma_wait<k_wgmma_groups_in_flight - 1>();  // never 0 in the loop: the queue must not drain
    }
  }
  wgmma_wait<0>();

  // Fragment of D (m64nNk*, fp32): thread t of the warpgroup holds, for 8-column chunk j, d[4j], d[4j+1]
  // at row 16 * (t / 32) + (t % 32) / 4, columns 8j + 2 * (t % 4) + {0, 1}, and d[4j+2], d[4j+3] 8 rows
  // below.
  const int t = threadIdx.x % 128, lane = t % 32;
  const int row = 16 * (t / 32) + lane / 4, col0 = 2 * (lane % 4);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int col = 8 * j + col0;
    sum += checksum_weight(row, col) * d[4 * j] + checksum_weight(row, col + 1) * d[4 * j + 1] +
           checksum_weight(row + 8, col) * d[4 * j + 2] + checksum_weight(row + 8, col + 1) * d[4 * j + 3];
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __shared__ float warp_sums[k_threads / 32];
  if (lane == 0) warp_sums[threadIdx.x / 32] = sum;
  if (tile_out != nullptr && blockIdx.x == 0) {
    float* out = tile_out + static_cast<std::size_t>(wg) * k_wgmma_m * k_wgmma_n;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = 8 * j + col0;
      *reinterpret_cast<float2*>(out + row * k_wgmma_n + col) = make_float2(d[4 * j], d[4 * j + 1]);
      *reinterpret_cast<float2*>(out + (row + 8) * k_wgmma_n + col) = make_float2(d[4 * j + 2], d[4 * j + 3]);
    }
  }
  __syncthreads();
  if (t == 0) {
    // Fixed order: every CTA's checksum is the same function of its accumulators.
    sums[blockIdx.x * k_wgmma_warpgroups + wg] =
        warp_sums[4 * wg] + warp_sums[4 * wg + 1] + warp_sums[4 * wg + 2] + warp_sums[4 * wg + 3];
  }
#else
  // No sm_90a code in this build: never launched (wgmma_probe_compiled() says so first); the poisoned
  // outputs would fail the check if it were.
  (void)tiles, (void)rounds, (void)sums, (void)tile_out;
#endif
}

__global__ void wgmma_arch_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

template <Operand T>
const void* configured_kernel() {
  const void* fn = reinterpret_cast<const void*>(wgmma_probe_kernel<T>);
  // Above the default 48 KiB of dynamic shared memory a kernel must opt in; per device, so every time.
  AISP_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem_bytes));
  return fn;
}

const void* kernel_for(Operand type) {
  switch (type) {
    case Operand::bf16: return configured_kernel<Operand::bf16>();
    case Operand::f16: return configured_kernel<Operand::f16>();
    case Operand::f32: return configured_kernel<Operand::f32>();
    case Operand::e4m3: return configured_kernel<Operand::e4m3>();
  }
  return nullptr;
}

}  // namespace

WgmmaShape wgmma_shape(Operand type) {
  // Dense rates per SM and clock: 989.4 TFLOP/s bf16 = 132 SMs x 4096 x 1.83 GHz on an H100 SXM; fp8
  // doubles it, tf32 halves it.
  switch (type) {
    case Operand::bf16: return {"wgmma.mma_async m64n256k16 .f32.bf16.bf16", 16, 2, 4096};
    case Operand::f16: return {"wgmma.mma_async m64n256k16 .f32.f16.f16", 16, 2, 4096};
    case Operand::f32: return {"wgmma.mma_async m64n256k8 .f32.tf32.tf32", 8, 4, 2048};
    case Operand::e4m3: return {"wgmma.mma_async m64n256k32 .f32.e4m3.e4m3", 32, 1, 8192};
  }
  return {"", 0, 0, 0};
}

bool wgmma_probe_compiled(cudaStream_t stream) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(wgmma_arch_kernel)) != cudaSuccess) {
    (void)cudaGetLastError();  // no code for this device at all: not an error of the probe, an answer
    return false;
  }
  DeviceBuffer<int> flag(1);
  wgmma_arch_kernel<<<1, 1, 0, stream>>>(flag.data());
  AISP_CHECK_LAUNCH();
  int host = 0;
  AISP_CUDA_CHECK(cudaMemcpyAsync(&host, flag.data(), sizeof host, cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host == 1;
}

int wgmma_probe_ctas(const DeviceFacts& d) {
  int per_sm = 0;
  AISP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(Operand::bf16), k_threads,
                                                                k_smem_bytes));
  if (per_sm < 1) throw CudaError(cudaErrorInvalidConfiguration, "wgmma probe: no CTA fits on an SM");
  return per_sm * d.sm_count;
}

void launch_wgmma_probe(Operand type, const void* tiles, int rounds, float* sums, float* tile_out, int ctas,
                        cudaStream_t stream) {
  const auto* src = static_cast<const uint4*>(tiles);
  kernel_for(type);
  switch (type) {
    case Operand::bf16:
      wgmma_probe_kernel<Operand::bf16><<<ctas, k_threads, k_smem_bytes, stream>>>(src, rounds, sums, tile_out);
      break;
    case Operand::f16:
      wgmma_probe_kernel<Operand::f16><<<ctas, k_threads, k_smem_bytes, stream>>>(src, rounds, sums, tile_out);
      break;
    case Operand::f32:
      wgmma_probe_kernel<Operand::f32><<<ctas, k_threads, k_smem_bytes, stream>>>(src, rounds, sums, tile_out);
      break;
    case Operand::e4m3:
      wgmma_probe_kernel<Operand::e4m3><<<ctas, k_threads, k_smem_bytes, stream>>>(src, rounds, sums, tile_out);
      break;
  }
  AISP_CHECK_LAUNCH();
}

double wgmma_checksum_weight(int row, int col) { return checksum_weight(row, col); }

}  // namespace aisp::probe
