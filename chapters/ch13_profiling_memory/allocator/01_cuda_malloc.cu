// ch13:allocator:01_cuda_malloc — every activation and gradient from cudaMalloc, returned with cudaFree
// when the step is done with it (the baseline).
//
// What: the step (training_step.cu) asks for 2 * layers buffers and frees them in backward order; here each
// request is a cudaMalloc and each free a cudaFree, the obvious code for "this layer needs a buffer". It
// is correct without any thought about streams, because cudaFree does not return until the device has
// finished everything queued (CUDA Programming Guide, "Stream Ordered Memory Allocator": cudaFree
// synchronizes the device), so no kernel can lose its buffer mid-flight.
// Why it is slow: that synchronization is the realistic cost, not an artificial one. Each cudaFree drains
// the GPU, so the host cannot queue ahead and every kernel's launch latency is exposed; each cudaMalloc is
// a driver call that finds (and for a new range maps) device memory. The step pays both 2 * layers times.
// Napkin math: at the defaults (64 layers) that is 128 cudaMalloc + 128 cudaFree calls, each of order
// ten microseconds, plus 128 launch + drain round trips (the measured "launch_roundtrip" ceiling of
// aisp hw peaks): milliseconds per step around kernels that need a fraction of a millisecond.
// Peak memory: each buffer is its own allocation, freed as soon as it is dead, so the device holds close to
// the schedule's peak of live bytes (the facts: peak_live_mib against device_peak_mib).
// Run: aisp bench run --targets ch13:allocator:01_cuda_malloc
#include "chapters/ch13_profiling_memory/allocator/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch13::allocator::v01 {

class CudaMallocMemory final : public StepMemory {
 public:
  void* allocate(std::size_t bytes, cudaStream_t /*stream*/) override {
    void* p = nullptr;
    AISP_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  // Waits for the device to finish everything queued, the kernels that used `p` included.
  void release(void* p, cudaStream_t /*stream*/) override { AISP_CUDA_CHECK(cudaFree(p)); }
};

class CudaMallocStep {
 public:
  // One measured warm-up step for the facts; the step leaves nothing allocated behind.
  void setup(const Args& a, cudaStream_t stream) { m_device_peak = measure_step_footprint(a, m_memory, stream); }
  void launch(const Args& a, cudaStream_t stream) { enqueue_training_step(a, m_memory, stream); }
  std::vector<Fact> facts(const Args& a) { return footprint_facts(a, m_device_peak); }

 private:
  CudaMallocMemory m_memory;
  std::size_t m_device_peak = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(AllocatorProblem, CudaMallocStep, .step = 1, .slug = "cuda_malloc",
                               .kind = VariantKind::baseline,
                               .summary = "cudaMalloc per buffer, cudaFree when dead: the device syncs per free");

}  // namespace aisp::ch13::allocator::v01
