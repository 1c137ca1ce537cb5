// ch10:hgemm:03_cp_async_multistage — feed step 02's MMAs from a 4-stage cp.async pipeline.
//
// What changed: only how K slices reach shared memory. Step 02 loaded a slice into registers,
// stored it, waited, computed, and waited again, so the tensor cores idled for a full global-load
// latency per slice. Here every thread issues `cp.async.cg.shared.global` 16-byte copies that go
// from L2 to shared memory without passing through registers, grouped per slice with
// cp.async.commit_group, and the block keeps k_stages - 1 = 3 slices in flight ahead of the one it
// multiplies (cp.async.wait_group k_stages - 2 waits for the oldest only). One __syncthreads per
// slice both publishes the landed slice to all warps and certifies that everyone has finished
// reading the stage about to be refilled.
// Why it should help: one block per SM cannot hide load latency with other blocks, so it must hide
// it with in-flight copies: a slice is 4.2 MFLOP, ~0.9 us of MMA at one SM's share of ~600 TFLOP/s,
// so three slices ahead (~2.8 us) cover a DRAM round trip (under 1 us) with room for queueing. The
// copies also free the ~50 registers step 02 held loaded data in, and the issue slots of the
// st.shared instructions.
// Napkin math: same MMA work and shared reads as step 02; 4 stages x 48 KiB = 192 KiB of shared
// memory of the H200's 227 KiB per block. mma.sync cannot reach wgmma's rate on Hopper (it issues
// from one warp at a time per SM quadrant and needs registers for both operands), so expect a clear
// gap to cuBLAS.
// Run: aisp bench run --targets ch10:hgemm:03_cp_async_multistage
// PTX ISA: "Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group",
// "cp.async.wait_group"; "Warp-level Matrix Multiply-Accumulate Instructions: mma"; "ldmatrix".
#include <cuda_bf16.h>

#include "chapters/ch10_tensor_cores/hgemm/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch10::hgemm::v03 {

// A K slice row is 64 bf16 = 128 bytes = 8 pieces of 16 bytes.
constexpr int BM = 128, BN = 256, BK = 64;
constexpr int k_threads = 256;  // 8 warps: 2 along M x 4 along N
constexpr int WM = 64, WN = 64;
constexpr int k_mma_m = WM / 16, k_mma_n = WN / 8;  // 4 x 8 mma tiles of 16x8 per warp
constexpr int k_stages = 4;
constexpr int k_stage_bytes = (BM + BN) * BK * 2;  // 48 KiB: the A slice, then the B slice
constexpr int k_smem = k_stages * k_stage_bytes;   // 192 KiB

// Shared tiles are rows of 128 bytes, one whole sweep of the 32 banks. Piece `p` (16 bytes) of row
// `r` is stored at piece p ^ (r % 8): the 8 rows an ldmatrix 8x8 matrix reads (same logical piece,
// 8 consecutive rows) then land in 8 different bank groups, as do the 8 pieces of one row a warp
// stores.
__device__ inline unsigned swizzled(unsigned base, int row, int piece) {
  return base + row * 128 + ((piece ^ (row % 8)) * 16);
}

// Global -> shared without registers: 16-byte cp.async per thread and pass, `rows` rows of BK bf16.
// .cg caches in L2 only: each piece is read once per block, so L1 would only be polluted.
template <int rows>
__device__ inline void load_tile_async(unsigned smem, const __nv_bfloat16* src, int ld) {
  for (int p = threadIdx.x; p < rows * BK / 8; p += k_threads) {
    const int row = p / (BK / 8), piece = p % (BK / 8);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(swizzled(smem, row, piece)),
                 "l"(src + static_cast<std::size_t>(row) * ld + piece * 8)
                 : "memory");
  }
}

// One commit group per K slice, committed even when empty so that "all but the newest n groups"
// always means "all but the newest n slices".
__device__ inline void load_slice_async(unsigned stage, const __nv_bfloat16* a_block,
                                        const __nv_bfloat16* b_block, int k0, int k) {
  if (k0 < k) {
    load_tile_async<BM>(stage, a_block + k0, k);
    load_tile_async<BN>(stage + BM * BK * 2, b_block + k0, k);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D for one 16x8x16 tile; A row-major (K contiguous), B "col" = N x K with K
// contiguous.
__device__ inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(k_threads, 1)
    hgemm_multistage_kernel(const __nv_bfloat16* __restrict__ a,
                            const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ c,
                            int n, int k) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned smem_base = static_cast<unsigned>(__cvta_generic_to_shared(smem));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 4 * WM, warp_n = warp % 4 * WN;
  const int block_m = blockIdx.y * BM, block_n = blockIdx.x * BN;
  const __nv_bfloat16* a_block = a + static_cast<std::size_t>(block_m) * k;
  const __nv_bfloat16* b_block = b + static_cast<std::size_t>(block_n) * k;

  float acc[k_mma_m][k_mma_n][4] = {};

  for (int s = 0; s < k_stages - 1; ++s)
    load_slice_async(smem_base + s * k_stage_bytes, a_block, b_block, s * BK, k);

  for (int slice = 0, k0 = 0; k0 < k; ++slice, k0 += BK) {
    // Slice `slice` is the oldest of the k_stages - 1 groups in flight: wait for it alone, then
    // make it visible to every warp. The barrier also means all warps are done with slice - 1,
    // whose stage the copies issued next overwrite.
    asm volatile("cp.async.wait_group %0;" ::"n"(k_stages - 2) : "memory");
    __syncthreads();
    load_slice_async(smem_base + (slice + k_stages - 1) % k_stages * k_stage_bytes, a_block,
                     b_block, k0 + (k_stages - 1) * BK, k);
    const unsigned a_smem = smem_base + slice % k_stages * k_stage_bytes;
    const unsigned b_smem = a_smem + BM * BK * 2;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // A 16x16 fragment: lanes 0-15 point at rows 0-15 of the left 8 columns, lanes 16-31 at the
      // right 8, giving registers a0..a3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k
      // 8-15), (8-15, 8-15).
      unsigned fa[k_mma_m][4];
#pragma unroll
      for (int i = 0; i < k_mma_m; ++i)
        ldmatrix_x4(fa[i], swizzled(a_smem, warp_m + i * 16 + lane % 16, kk * 2 + lane / 16));
      // B: one x4 covers two n8 tiles: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
      // (n 8-15, k 8-15); an 8x8 matrix with rows = n gives each lane exactly the b0/b1 layout of
      // mma.
      unsigned fb[k_mma_n / 2][4];
#pragma unroll
      for (int j = 0; j < k_mma_n / 2; ++j)
        ldmatrix_x4(fb[j], swizzled(b_smem, warp_n + j * 16 + lane % 8 + lane / 16 * 8,
                                    kk * 2 + lane / 8 % 2));
#pragma unroll
      for (int i = 0; i < k_mma_m; ++i)
#pragma unroll
        for (int j = 0; j < k_mma_n; ++j)
          mma_bf16(acc[i][j], fa[i], fb[j / 2][j % 2 * 2], fb[j / 2][j % 2 * 2 + 1]);
    }
  }

  // Accumulator layout of m16n8: lane l holds (row l/4, columns 2*(l%4) and +1) in d0, d1 and the
  // same columns of row l/4 + 8 in d2, d3. Each pair becomes one 4-byte bf16x2 store.
#pragma unroll
  for (int i = 0; i < k_mma_m; ++i) {
#pragma unroll
    for (int j = 0; j < k_mma_n; ++j) {
      const std::size_t row = block_m + warp_m + i * 16 + lane / 4;
      const std::size_t col = block_n + warp_n + j * 8 + lane % 4 * 2;
      *reinterpret_cast<__nv_bfloat162*>(c + row * n + col) =
          __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<__nv_bfloat162*>(c + (row + 8) * n + col) =
          __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
    }
  }
}

// More than the default 48 KiB of dynamic shared memory needs an opt-in, once, before the first
// launch and before the occupancy query in facts().
void allow_large_smem() {
  static const bool configured = [] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(hgemm_multistage_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, k_smem));
    return true;
  }();
  (void)configured;
}

void launch(const Args& a, cudaStream_t stream) {
  allow_large_smem();
  const dim3 grid(a.n / BN, a.m / BM);  // shapes.hpp guarantees M, N, K % 256 == 0
  hgemm_multistage_kernel<<<grid, k_threads, k_smem, stream>>>(a.a, a.b, a.c, a.n, a.k);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args&) {
  allow_large_smem();
  return standard_facts(
      kernel_facts(reinterpret_cast<const void*>(hgemm_multistage_kernel), k_threads, k_smem));
}

AISP_REGISTER_VARIANT_WITH_FACTS(HgemmProblem, launch, facts, .step = 3,
                                 .slug = "cp_async_multistage", .kind = VariantKind::step,
                                 .summary = "step 02 fed by cp.async 16-byte copies, 4-stage "
                                            "pipeline (3 K slices in flight)");

}  // namespace aisp::ch10::hgemm::v03
