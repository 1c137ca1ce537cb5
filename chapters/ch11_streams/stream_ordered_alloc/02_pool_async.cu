// ch11:stream_ordered_alloc:02_pool_async — the temporaries come from a memory pool in stream order:
// cudaMallocFromPoolAsync before the kernels, cudaFreeAsync after them, on the harness's stream.
//
// What changed: only how the temporaries are obtained and returned. setup() creates a memory pool on the
// harness's GPU and sets its release threshold to "never" (UINT64_MAX), so memory freed into the pool stays
// mapped for the next step instead of going back to the OS at the next synchronize (the default threshold,
// 0, returns it). Each step then allocates both temporaries from the pool on the stream, runs step 01's
// three kernels unchanged, and frees both on the stream. A pool of its own rather than the device's default
// one (cudaMallocAsync) only so that the threshold set here changes nothing for anyone else in the process.
// Why it helps: an allocation is now an entry in the stream, ordered after the work before it; a free is
// ordered after the kernels that use the memory, so nothing has to wait for the device, and the next
// step's allocation reuses the same bytes in stream order. No driver allocation, no OS call, no device
// synchronization: the host queues steps back to back while the GPU runs them, and the time per step
// falls toward the larger of the GPU's three kernels and the host's cost of queueing seven calls.
// Napkin math: the first steps grow the pool once (8 MiB at the default size; the warm-up absorbs it);
// after that each step is ~3 kernel launches + 4 cheap stream-ordered calls of a few microseconds each on
// the host, against step 01's tens of microseconds per allocation call plus a full device drain.
// Run: aisp bench run --targets ch11:stream_ordered_alloc:02_pool_async
#include <cstdint>
#include <limits>

#include "chapters/ch11_streams/stream_ordered_alloc/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::stream_ordered_alloc::v02 {

constexpr int k_threads = 256;

// Step 01's kernels, unchanged.
__global__ void affine_kernel(const float* __restrict__ x, float* __restrict__ t1, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) t1[i] = __fmaf_rn(k_scale, x[i], k_shift);
}

__global__ void leaky_relu_kernel(const float* __restrict__ t1, float* __restrict__ t2, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) {
    const float t = t1[i];
    t2[i] = t > 0.0f ? t : __fmul_rn(k_slope, t);
  }
}

__global__ void gate_kernel(const float* __restrict__ t2, const float* __restrict__ x, float* __restrict__ out,
                            std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(t2[i], x[i]);
}

class PoolAsync {
 public:
  PoolAsync() = default;
  PoolAsync(const PoolAsync&) = delete;
  PoolAsync& operator=(const PoolAsync&) = delete;

  void setup(const Args& a, cudaStream_t /*stream*/) {
    cudaMemPoolProps props{};  // zeroed: no IPC handle types, no size limit, reserved fields 0
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = a.device;
    AISP_CUDA_CHECK(cudaMemPoolCreate(&m_pool, &props));
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    AISP_CUDA_CHECK(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const std::size_t bytes = a.n * sizeof(float);
    void* t1 = nullptr;
    void* t2 = nullptr;
    AISP_CUDA_CHECK(cudaMallocFromPoolAsync(&t1, bytes, m_pool, stream));
    AISP_CUDA_CHECK(cudaMallocFromPoolAsync(&t2, bytes, m_pool, stream));
    float* f1 = static_cast<float*>(t1);
    float* f2 = static_cast<float*>(t2);
    const auto blocks = static_cast<unsigned>((a.n + k_threads - 1) / k_threads);
    affine_kernel<<<blocks, k_threads, 0, stream>>>(a.x, f1, a.n);
    AISP_CHECK_LAUNCH();
    leaky_relu_kernel<<<blocks, k_threads, 0, stream>>>(f1, f2, a.n);
    AISP_CHECK_LAUNCH();
    gate_kernel<<<blocks, k_threads, 0, stream>>>(f2, a.x, a.out, a.n);
    AISP_CHECK_LAUNCH();
    // Ordered after the kernels on the same stream: the memory returns to the pool only once they are done.
    AISP_CUDA_CHECK(cudaFreeAsync(t1, stream));
    AISP_CUDA_CHECK(cudaFreeAsync(t2, stream));
  }

  ~PoolAsync() {
    // With frees still pending on a stream, the pool is released once they complete (cudaMemPoolDestroy).
    if (m_pool) cudaMemPoolDestroy(m_pool);
  }

 private:
  cudaMemPool_t m_pool = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(StreamOrderedAllocProblem, PoolAsync, .step = 2, .slug = "pool_async",
                               .kind = VariantKind::optimized,
                               .summary = "temporaries from a memory pool in stream order, kept cached: no sync");

}  // namespace aisp::ch11::stream_ordered_alloc::v02
