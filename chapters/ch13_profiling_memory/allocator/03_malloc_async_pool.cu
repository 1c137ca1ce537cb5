// ch13:allocator:03_malloc_async_pool — the step's buffers from a CUDA memory pool in stream order
// (cudaMallocFromPoolAsync / cudaFreeAsync), the pool told to keep its memory between steps.
//
// What changed: step 02's home-made cache becomes the driver's stream-ordered allocator. setup() creates a
// memory pool on the harness's GPU and sets cudaMemPoolAttrReleaseThreshold to "never release" (UINT64_MAX):
// with the default threshold, 0, the pool returns its unused memory to the OS at every synchronization,
// and the next step would map it again. A pool of its own rather than the device's default pool
// (cudaMallocAsync) only so that the threshold set here changes nothing for the rest of the process.
// Why it helps: an allocation is an entry in the stream, ordered after the work queued before it, and a free
// is ordered after the kernels that use the buffer; the pool reuses freed bytes for later allocations on
// the same stream without any host-side wait. Unlike step 02's size classes, the pool manages the memory
// it reserves itself and may serve a request from bytes freed by a request of another size (its policy is
// the driver's and not documented in detail; pool_reserved_mib shows what it actually held).
// Napkin math: the first step grows the pool (setup() runs it); after that each allocation and free is a
// stream-ordered call of order a microsecond on the host, so the step, like step 02's, costs about what
// queueing its kernels costs. Whether the driver's calls are cheaper or dearer than step 02's map
// lookups is what this step measures; its reserved memory (facts: pool_reserved_mib) should sit near the
// schedule's peak of live bytes rather than step 02's.
// Run: aisp bench run --targets ch13:allocator:03_malloc_async_pool
#include <cstdint>
#include <limits>

#include "chapters/ch13_profiling_memory/allocator/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch13::allocator::v03 {

class PoolMemory final : public StepMemory {
 public:
  PoolMemory() = default;
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;
  // Frees still pending on a stream are completed before the pool is released (cudaMemPoolDestroy).
  ~PoolMemory() override {
    if (m_pool) cudaMemPoolDestroy(m_pool);
  }

  void create(int device) {
    cudaMemPoolProps props{};  // zeroed: no IPC handle types, no size limit, reserved fields 0
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    AISP_CUDA_CHECK(cudaMemPoolCreate(&m_pool, &props));
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    AISP_CUDA_CHECK(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  }

  void* allocate(std::size_t bytes, cudaStream_t stream) override {
    void* p = nullptr;
    AISP_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, m_pool, stream));
    return p;
  }
  // Ordered after the kernels queued before it on the same stream: the bytes return to the pool only
  // once they are done.
  void release(void* p, cudaStream_t stream) override { AISP_CUDA_CHECK(cudaFreeAsync(p, stream)); }

  std::uint64_t attribute(cudaMemPoolAttr attr) const {
    std::uint64_t value = 0;
    AISP_CUDA_CHECK(cudaMemPoolGetAttribute(m_pool, attr, &value));
    return value;
  }

 private:
  cudaMemPool_t m_pool = nullptr;
};

class PoolStep {
 public:
  // The pool, then the first step, which grows it; measuring that step gives the facts.
  void setup(const Args& a, cudaStream_t stream) {
    m_memory.create(a.device);
    m_device_peak = measure_step_footprint(a, m_memory, stream);
  }
  void launch(const Args& a, cudaStream_t stream) { enqueue_training_step(a, m_memory, stream); }
  std::vector<Fact> facts(const Args& a) {
    std::vector<Fact> facts = footprint_facts(a, m_device_peak);
    facts.push_back({"pool_reserved_mib",
                     mib_string(static_cast<double>(m_memory.attribute(cudaMemPoolAttrReservedMemHigh)))});
    return facts;
  }

 private:
  PoolMemory m_memory;
  std::size_t m_device_peak = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(AllocatorProblem, PoolStep, .step = 3, .slug = "malloc_async_pool",
                               .kind = VariantKind::optimized,
                               .summary = "cudaMallocFromPoolAsync/cudaFreeAsync, pool keeps its memory: no sync");

}  // namespace aisp::ch13::allocator::v03
