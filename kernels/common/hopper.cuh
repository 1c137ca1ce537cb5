// kernels/common/hopper.cuh — the Hopper (sm_90a) vocabulary shared by more than one ladder: mbarriers,
// TMA tile loads (2-D, plain and multicast), the 128-byte-swizzled K-major wgmma shared-memory descriptor,
// the wgmma fence/commit/wait trio and the register fence around it, setmaxnreg, the grouped tile order and
// cluster rank/barrier, named barriers, plain bulk copies, the epilogue through shared memory and TMA
// stores, and the driver's tensor-map encoder reached through the runtime. First user ch10:hgemm (steps
// 04-08), then ch18:flash_attention (steps 04-08) and ch19:fp8_gemm (steps 02-11); what only one ladder
// needs stays in that ladder's own header (ch10's hopper_gemm.cuh, ch18's hopper_attention.cuh, ch19's
// fp8_hopper.cuh).
//
// PTX ISA sections cited (PTX ISA 8.x / 9.0):
// - "Parallel Synchronization and Communication Instructions: mbarrier" (init, arrive, expect_tx,
//   try_wait.parity), and "mapa" for the address of a barrier in another CTA of the cluster;
// - "Data Movement and Conversion Instructions: cp.async.bulk.tensor" (tile mode, .multicast::cluster);
// - "Warpgroup Matrix Multiply-Accumulate Instructions": wgmma.fence, wgmma.commit_group,
//   wgmma.wait_group, and "Matrix Descriptor Format" for the shared-memory descriptors;
// - "Miscellaneous Instructions: setmaxnreg"; "barrier.cluster" and the %cluster_ctarank special register.
// CUDA C++ Programming Guide: "Asynchronous Data Copies using the Tensor Memory Accelerator (TMA)" and
// "Thread Block Clusters" / "Distributed Shared Memory".
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only: the driver is reached through the runtime, never linked
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "device/cuda_check.hpp"

namespace aisp::hopper {

__device__ inline unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// ---- mbarrier -------------------------------------------------------------------------------------------

__device__ inline void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// The initialising stores must be visible to the async proxy (TMA) and, in a cluster, to the other CTAs.
__device__ inline void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival that also announces `bytes` of TMA traffic the current phase must wait for.
__device__ inline void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

__device__ inline void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `cta_rank` of this cluster (mapa gives its
// shared::cluster address). Default semantics (release at CTA scope), not .release.cluster: the latter
// compiles to MEMBAR.ALL.GPU before every arrival, and what it would order here (the wgmma's reads of the
// stage) is already complete once wgmma.wait_group has returned.
__device__ inline void mbar_arrive_cluster(std::uint64_t* bar, unsigned cta_rank) {
  asm volatile(
      "{ .reg .b32 remote;\n"
      "  mapa.shared::cluster.u32 remote, %0, %1;\n"
      "  mbarrier.arrive.shared::cluster.b64 _, [remote]; }" ::"r"(smem_u32(bar)),
      "r"(cta_rank)
      : "memory");
}

// Spins until the phase with parity `parity` has completed. On a fresh barrier, parity 1 counts as the
// completed phase before the first, so a producer can wait "empty" with parity 1 on its first round.
__device__ inline void mbar_wait(std::uint64_t* bar, unsigned parity) {
  const unsigned addr = smem_u32(bar);
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA ------------------------------------------------------------------------------------------------

// Loads the box at element coordinates (x = k, y = row) of `map` into shared memory; its bytes complete
// on `bar` (complete_tx).
__device__ inline void tma_load(void* dst, const CUtensorMap* map, std::uint64_t* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(x), "r"(y)
      : "memory");
}

// Copies `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned) from global to shared
// memory with the bulk-copy engine (PTX ISA "cp.async.bulk", no tensor map); they complete on `bar`.
__device__ inline void bulk_load(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// The same box written to the same shared-memory offset in every CTA of the cluster whose bit is set in
// `cta_mask`, completing on the barrier at the same offset in each.
__device__ inline void tma_load_multicast(void* dst, const CUtensorMap* map, std::uint64_t* bar, int x, int y,
                                          std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(x), "r"(y), "h"(cta_mask)
      : "memory");
}

// ---- wgmma ----------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor ("Matrix Descriptor Format") of a K-major tile written by TMA with the
// 128-byte swizzle, rows of 64 bf16 = 128 bytes: start address >> 4 (bits 0-13), leading byte offset
// (unused for swizzled K-major layouts; 1), stride byte offset = 1024 B >> 4 between 8-row atoms (bits
// 32-45), swizzle mode 1 = 128 B (bits 62-63). The tile must start 1024-byte aligned (base offset 0).
// Stepping K by 16 elements within the 64-element swizzle row is +32 bytes on the start address: the
// hardware applies the swizzle.
__device__ inline std::uint64_t smem_desc(const void* tile) {
  const std::uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFFULL) >> 4) | (1ULL << 16) | ((1024ULL >> 4) << 32) | (1ULL << 62);
}

// Orders this thread's register and shared-memory accesses before the wgmma that follow.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are still pending.
template <int N>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Pins the registers in the instruction stream: the compiler treats each as read and rewritten here, so it
// can neither move a use of a wgmma accumulator above the wgmma.wait_group that makes it valid, nor sink a
// write of it (ch18:flash_attention's O rescale) below the wgmma.fence that must follow it.
template <int N>
__device__ inline void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ inline void fence_regs(unsigned (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// ---- registers ----------------------------------------------------------------------------------------

// Hand registers back to the SM (a producer needs few) or take them (consumers hold the accumulators).
// Takes effect only with a register cap at kernel entry (__launch_bounds__(threads, 1)).
template <int N>
__device__ inline void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ inline void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// ---- tile order and clusters ----------------------------------------------------------------------------

// Tile t of the grouped (L2-friendly) order over a grid of `rows` x `cols` output tiles: bands of `group`
// tile rows, walked column-major inside a band, so that the CTAs running at once share the A rows and B
// columns they read in L2 (ch10:hgemm step 06 introduces it). With 2-CTA clusters along M, `rows` and
// `group` count pairs of tile rows.
__device__ inline int2 grouped_tile_coords(int t, int rows, int cols, int group) {
  const int per_group = group * cols;
  const int first = (t / per_group) * group;
  const int band = min(group, rows - first);
  const int in_group = t % per_group;
  return {first + in_group % band, in_group / band};
}

__device__ inline unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster: orders barrier initialisation before remote use, and keeps a
// CTA's shared memory alive until its peers can no longer write to it (PTX ISA "barrier.cluster"). Not
// .aligned: at the end, a producer's thread 0 may arrive later than the rest of its warp.
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;" ::: "memory");
}

// ---- epilogue through shared memory and TMA stores (ch10:hgemm step 08, ch19:fp8_gemm steps 08-11) -----
//
// PTX ISA: "cp.async.bulk.tensor" (the .global.shared::cta direction, .bulk_group completion),
// "cp.async.bulk.commit_group", "cp.async.bulk.wait_group" (.read: only the shared-memory source must be
// consumed), "membar/fence" (fence.proxy.async: shared-memory writes of the generic proxy made visible to the
// async proxy that the TMA engine reads through), "bar, barrier" (bar.sync with an id and a thread count).

// Stores the box of `map` at element coordinates (x = column, y = row) from 1024-aligned shared memory
// `src` to global memory. Completes in the issuing thread's current bulk async-group.
__device__ inline void tma_store(const CUtensorMap* map, const void* src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(smem_u32(src)), "r"(x), "r"(y)
               : "memory");
}

// Closes the issuing thread's bulk async-group (the stores issued since the last commit).
__device__ inline void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's committed bulk groups still read their shared-memory source:
// after it, the buffers of the older groups may be overwritten (their global writes may still be in flight).
template <int N>
__device__ inline void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Waits until at most N of this thread's committed bulk groups are incomplete (writes included).
template <int N>
__device__ inline void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Makes this thread's earlier st.shared visible to the TMA engine (the async proxy).
__device__ inline void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Named barriers. PTX ISA "Parallel Synchronization and Communication Instructions: bar, barrier": a CTA
// has 16 hardware barriers; `bar.sync id, n` waits until n threads (a multiple of 32) have reached barrier
// `id` counting itself, `bar.arrive id, n` counts the calling warp without waiting (a producer/consumer
// signal). Id 0 is __syncthreads'. Both are .aligned: every thread of a warp executes the same one.
__device__ inline void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Writes columns 64 * chunk .. 64 * chunk + 63 of a consumer warpgroup's 64 x N accumulators (the fragment
// of a m64nN wgmma, bf16's or FP8's), times `scale`, rounded to bf16, into a 64 x 64 bf16 staging tile (8
// KiB, 1024-aligned) in the 128-byte-swizzled layout a SWIZZLE_128B tensor map stores from: 16-byte piece p
// of row r sits at r * 128 + 16 * (p ^ (r % 8)). A warp's 4-byte store covers 8 rows x 16 bytes; unswizzled
// the 8 rows would share 4 banks (8-way conflict), swizzled they land on 32 different banks. `chunk` must be
// a compile-time constant after unrolling (the accumulators stay in registers). The stores are st.shared on
// a 32-bit shared-window address: through the generic pointer (which the compiler cannot prove shared after
// the base's alignment arithmetic) they would be generic ST instructions.
template <int Regs>  // 128 for a m64n256 fragment (chunks 0-3), 64 for m64n128 (chunks 0-1)
__device__ __forceinline__ void stage_chunk_64x64(const float (&d)[Regs], int chunk, const unsigned char* tile,
                                                  float scale = 1.0f) {
  const int t = threadIdx.x % 128;
  const int row = 16 * (t / 32) + (t % 32) / 4;  // and row + 8; both are (t % 32) / 4 modulo 8
  const int r8 = (t % 32) / 4;
  const unsigned top = smem_u32(tile) + row * 128 + 4 * (t % 4);
  const unsigned bottom = top + 8 * 128;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int jj = 8 * chunk + j;  // n8 block of the 64 x (2 * Regs) fragment
    const unsigned piece = 16 * (j ^ r8);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(d[4 * jj] * scale, d[4 * jj + 1] * scale);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(d[4 * jj + 2] * scale, d[4 * jj + 3] * scale);
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(top + piece), "r"(*reinterpret_cast<const unsigned*>(&hi))
                 : "memory");
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(bottom + piece), "r"(*reinterpret_cast<const unsigned*>(&lo))
                 : "memory");
  }
}

// A consumer warpgroup's 64 x (64 * Chunks) slice of an output tile, written to C by TMA stores through
// Buffers staging tiles of 8 KiB (`staging`, 1024-aligned, Buffers * 8 KiB): chunk c (columns 64c ..
// 64c + 63) goes through buffer c % Buffers, whose store of Buffers chunks ago (this tile's or the
// previous one's) must have read it first. Only the issuing thread (`issuer`, one per warpgroup) can wait
// for its own bulk groups; the named barrier `barrier` (128 threads) tells the others, and makes every
// thread's staged values visible before the store. Chunks % Buffers == 0 keeps the buffer parity the same
// for every tile, so no counter is needed. The caller waits for the last stores (bulk_wait_group<0>)
// before the kernel ends.
template <int Chunks, int Buffers, int Regs>
__device__ __forceinline__ void store_tile_via_staging(const float (&d)[Regs], unsigned char* staging, bool issuer,
                                                       int barrier, const CUtensorMap* map_c, int col0, int row0,
                                                       float scale = 1.0f) {
  static_assert(Chunks % Buffers == 0, "the buffer parity must restart with every tile");
  constexpr int chunk_bytes = 64 * 64 * 2;
#pragma unroll
  for (int c = 0; c < Chunks; ++c) {
    unsigned char* buffer = staging + (c % Buffers) * chunk_bytes;
    if (issuer) bulk_wait_group_read<Buffers - 1>();
    named_barrier_sync(barrier, 128);
    stage_chunk_64x64(d, c, buffer, scale);
    fence_proxy_async_shared();  // each writer's st.shared before the TMA engine reads them
    named_barrier_sync(barrier, 128);
    if (issuer) {
      tma_store(map_c, buffer, col0 + 64 * c, row0);
      bulk_commit_group();
    }
  }
}

// ---- host: tensor maps ----------------------------------------------------------------------------------

// The driver's cuTensorMapEncodeTiled, looked up once through cudaGetDriverEntryPointByVersion so that
// the binary does not link libcuda.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    AISP_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw std::runtime_error("cuTensorMapEncodeTiled is not available from this driver");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A tensor map of a K-major bf16 matrix (rows x k, row-major; consecutive rows `row_stride` elements apart,
// k when 0) read in boxes of box_rows x 64 with the 128-byte swizzle that smem_desc() describes: ch10:hgemm's
// operands, and any row-major bf16 output written by TMA stores in 64-column boxes (the C of the step-08
// epilogues of ch10:hgemm and ch19:fp8_gemm). TMA wants the base 16-byte aligned and the row stride a
// multiple of 16 bytes.
inline CUtensorMap make_tensor_map_k_major(const __nv_bfloat16* base, int rows, int k, int box_rows,
                                           int row_stride = 0) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride > 0 ? row_stride : k) *
                                 sizeof(__nv_bfloat16)};  // bytes, of dim 1
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};  // 64 bf16: one swizzle row
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(base), dims,
                            strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(static_cast<int>(r)));
  }
  return map;
}

}  // namespace aisp::hopper
