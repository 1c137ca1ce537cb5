// kernels/common/hopper.cuh — the Hopper (sm_90a) vocabulary shared by more than one ladder: mbarriers,
// TMA tile loads (2-D, plain and multicast), the 128-byte-swizzled K-major wgmma shared-memory descriptor,
// the wgmma fence/commit/wait trio, setmaxnreg, the grouped tile order and cluster rank/barrier, and the driver's tensor-map encoder reached through the
// runtime. First user ch10:hgemm (steps 04-07), second ch18:flash_attention (steps 04-05); what only one
// ladder needs stays in that ladder's own header (ch10's hopper_gemm.cuh, ch18's hopper_attention.cuh).
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
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>

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

}  // namespace aisp::hopper
