// ch13:allocator:02_caching_allocator — the step's buffers from a caching allocator of our own
// (caching_allocator.hpp): cudaMalloc only when the cache has no free block of the size class, and a freed
// buffer kept on its class's free list for the next request instead of going to cudaFree.
//
// What changed: only where the memory comes from. Step 01's cudaMalloc becomes CachingAllocator::allocate,
// its cudaFree becomes CachingAllocator::release, which is a push onto a host-side list: no driver call,
// no device synchronization. The first step fills the cache (setup() runs it); from then on every request
// of a step finds the block the previous step freed, because every step asks for the same sequence of
// sizes (the CPU tests check this: no backing allocation after the first step).
// Why it is safe without events: everything runs on the harness's one stream. A block freed on the host
// while its last kernel is still queued can be handed to the next buffer at once, because the next
// buffer's kernels are queued behind that kernel on the same stream and cannot start before it finishes.
// Two streams would need what PyTorch's allocator does (an event recorded at the free, or
// record_stream); if the harness ever passed a different stream, launch() drains the old one first.
// Napkin math: a cache hit is a map lookup, a vector pop and a hash-map insert, well under a microsecond,
// so the step costs what queueing its 2 * layers + 1 kernels costs the host (a few microseconds each),
// overlapped with the GPU running them: the larger of that and the kernels' own time, against step 01's
// milliseconds.
// Peak memory: the price. Without splitting, a freed block serves only its own size class, so the
// gradients, whose sizes rarely match an activation freed just before them, get blocks of their own:
// the cache can hold up to about twice the schedule's peak of live bytes (facts: cache_reserved_mib).
// Run: aisp bench run --targets ch13:allocator:02_caching_allocator
#include "chapters/ch13_profiling_memory/allocator/caching_allocator.hpp"
#include "chapters/ch13_profiling_memory/allocator/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch13::allocator::v02 {

// The cache's only contact with the driver.
class CudaBacking final : public BackingAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so that the retry's result is the one seen
      return nullptr;
    }
    AISP_CUDA_CHECK(status);
    return p;
  }
  // cudaFree synchronizes the device first, so a block is never returned while a kernel still uses it.
  // Called from the cache's destructor too: an error here is a sticky one already reported elsewhere.
  void release(void* ptr, std::size_t /*bytes*/) override { cudaFree(ptr); }
};

class CachingMemory final : public StepMemory {
 public:
  void* allocate(std::size_t bytes, cudaStream_t /*stream*/) override { return m_cache.allocate(bytes); }
  void release(void* p, cudaStream_t /*stream*/) override { m_cache.release(p); }
  const CacheStats& stats() const { return m_cache.stats(); }

 private:
  CudaBacking m_backing;  // declared first: destroyed after the cache that gives its blocks back to it
  CachingAllocator m_cache{m_backing};
};

class CachingStep {
 public:
  // The first step fills the cache; measuring it gives the facts.
  void setup(const Args& a, cudaStream_t stream) {
    m_stream = stream;
    m_device_peak = measure_step_footprint(a, m_memory, stream);
  }
  void launch(const Args& a, cudaStream_t stream) {
    if (stream != m_stream) {  // cached blocks may still be in use by work queued on the old stream
      AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
      m_stream = stream;
    }
    enqueue_training_step(a, m_memory, stream);
  }
  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> facts = footprint_facts(a, m_device_peak);
    const CacheStats& s = m_memory.stats();
    facts.push_back({"cache_reserved_mib", mib_string(static_cast<double>(s.peak_reserved_bytes))});
    facts.push_back({"cuda_mallocs", std::to_string(s.backing_allocations)});
    return facts;
  }

 private:
  CachingMemory m_memory;
  cudaStream_t m_stream = nullptr;
  std::size_t m_device_peak = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(AllocatorProblem, CachingStep, .step = 2, .slug = "caching_allocator",
                               .kind = VariantKind::step,
                               .summary = "own caching allocator: size classes, free lists, no sync per free");

}  // namespace aisp::ch13::allocator::v02
