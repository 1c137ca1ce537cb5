// ch07:copy:05_bulk_async — let the copy engine move the bytes: TMA bulk copies through shared memory.
//
// What changed: no thread loads or stores a single element any more. Each block owns a persistent share
// of 32 KiB chunks; one thread asks the SM's bulk-copy engine (the TMA unit, new in Hopper) to bring a
// chunk from global into shared memory, waits on an mbarrier for its bytes to land, and asks the engine to
// write the chunk back out to its destination. Four chunks are kept in flight per block, so loads of the
// next chunks overlap the store of the current one.
// Why it should help: steps 03 and 04 already keep enough bytes in flight, yet stay some percent short of
// cudaMemcpyAsync: every byte still passes through registers, and the reads and writes of thousands of
// warps interleave finely at the DRAM. The bulk engine moves whole 32 KiB chunks with one instruction
// each, with no register traffic, and issues long runs of reads and of writes.
// Napkin math: the same 8.59 GB per launch; the bound is the DRAM copy ceiling, which cudaMemcpyAsync
// approaches. 128 KiB of shared memory per block, one block per SM.
// Run: aisp bench run --targets ch07:copy:05_bulk_async
// PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk", "cp.async.bulk.commit_group",
// "cp.async.bulk.wait_group", and "Parallel Synchronization and Communication Instructions: mbarrier".
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::v05 {

constexpr int k_stages = 4;
constexpr unsigned k_chunk_bytes = 32u * 1024u;  // a multiple of 16, as cp.async.bulk requires

__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ inline void wait_for_phase(unsigned barrier, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (!done);
}

// One thread per block drives the engine; the others have nothing to do, so the block is one warp.
__global__ void __launch_bounds__(32) copy_bulk_async_kernel(const float* __restrict__ src,
                                                             float* __restrict__ dst, std::size_t n) {
  extern __shared__ __align__(128) unsigned char stage[];
  __shared__ __align__(8) unsigned long long full[k_stages];
  if (threadIdx.x != 0) return;

  const std::size_t bytes = n / 4 * 16;  // whole float4s go through the engine; the tail below
  const std::size_t chunks = (bytes + k_chunk_bytes - 1) / k_chunk_bytes;
  const std::size_t mine = blockIdx.x < chunks ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto* src_bytes = reinterpret_cast<const unsigned char*>(src);
  auto* dst_bytes = reinterpret_cast<unsigned char*>(dst);

  for (int s = 0; s < k_stages; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[s])) : "memory");
  }
  // The barriers were initialised by ordinary stores; the copy engine (async proxy) must see them.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

  const auto chunk_offset = [&](std::size_t k) { return (blockIdx.x + k * gridDim.x) * std::size_t{k_chunk_bytes}; };
  const auto chunk_length = [&](std::size_t k) {
    const std::size_t off = chunk_offset(k);
    return static_cast<unsigned>(bytes - off < k_chunk_bytes ? bytes - off : k_chunk_bytes);
  };
  const auto load = [&](std::size_t k) {
    const int s = static_cast<int>(k % k_stages);
    const unsigned bar = shared_address(&full[s]);
    const unsigned len = chunk_length(k);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(len) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            shared_address(stage + s * k_chunk_bytes)),
        "l"(src_bytes + chunk_offset(k)), "r"(len), "r"(bar)
        : "memory");
  };

  for (std::size_t k = 0; k < mine && k < k_stages; ++k) load(k);
  for (std::size_t k = 0; k < mine; ++k) {
    const int s = static_cast<int>(k % k_stages);
    wait_for_phase(shared_address(&full[s]), static_cast<unsigned>((k / k_stages) & 1));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst_bytes + chunk_offset(k)),
                 "r"(shared_address(stage + s * k_chunk_bytes)), "r"(chunk_length(k))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // Refill the stage of the previous chunk once its store has finished reading shared memory (at most
    // one store group, this one, may still be reading).
    if (k >= 1 && k - 1 + k_stages < mine) {
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      load(k - 1 + k_stages);
    }
  }
  // Shared memory must outlive the engine's reads and writes.
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");

  if (blockIdx.x == 0) {
    for (std::size_t i = bytes / 4; i < n; ++i) dst[i] = src[i];
  }
}

void launch(const Args& a, cudaStream_t stream) {
  constexpr int smem = k_stages * k_chunk_bytes;
  static const bool configured = [] {
    AISP_CUDA_CHECK(cudaFuncSetAttribute(copy_bulk_async_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)configured;
  copy_bulk_async_kernel<<<a.sm_count, 32, smem, stream>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 5, .slug = "bulk_async", .kind = VariantKind::step,
                      .summary = "TMA bulk copies global->shared->global, 4 x 32 KiB chunks in flight per SM",
                      .min_cc = 90);

}  // namespace aisp::ch07::copy::v05
