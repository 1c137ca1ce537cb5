// ch13:allocator — the training step every variant runs: reference.hpp's run_step with device kernels and
// memory from the variant's StepMemory. Identical for every step of the ladder (the ladder is about where
// the memory comes from, not about these kernels): 2 * layers + 1 small elementwise kernels per step.
#include <algorithm>

#include "chapters/ch13_profiling_memory/allocator/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch13::allocator {
namespace {

constexpr int k_threads = 256;  // one element per thread

unsigned blocks_for(std::size_t count) { return static_cast<unsigned>((count + k_threads - 1) / k_threads); }

// j mod count without a 64-bit division in the common case, where the source is at least as long.
__device__ std::size_t wrap(std::size_t j, std::size_t count) { return j < count ? j : j % count; }

__global__ void forward_kernel(float* __restrict__ act, std::size_t count, const float* __restrict__ src,
                               std::size_t src_count, float bias) {
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (j < count) act[j] = __fmaf_rn(k_decay, src[wrap(j, src_count)], bias);
}

// `up` may be `act` itself (the top layer): both only read.
__global__ void backward_kernel(float* __restrict__ g, std::size_t count, const float* up, std::size_t up_count,
                                const float* act) {
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (j < count) g[j] = __fmaf_rn(k_decay, up[wrap(j, up_count)], act[j]);
}

__global__ void output_kernel(float* __restrict__ out, std::size_t n, const float* __restrict__ g0,
                              std::size_t g0_count) {
  const std::size_t k = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (k < n) out[k] = g0[wrap(k, g0_count)];
}

// run_step's Ops on the device: kernels on the harness's stream, memory from the variant.
class DeviceStepOps {
 public:
  DeviceStepOps(const Args& a, StepMemory& memory, cudaStream_t stream)
      : m_args(a), m_memory(memory), m_stream(stream) {}

  float* allocate(std::size_t count) {
    return static_cast<float*>(m_memory.allocate(count * sizeof(float), m_stream));
  }
  void release(float* p) { m_memory.release(p, m_stream); }
  void forward(std::size_t i, float* act, const float* src, std::size_t src_count) {
    const std::size_t count = m_args.plan->counts[i];
    forward_kernel<<<blocks_for(count), k_threads, 0, m_stream>>>(act, count, src, src_count, layer_bias(i));
    AISP_CHECK_LAUNCH();
  }
  void backward(std::size_t i, float* g, const float* up, std::size_t up_count, const float* act) {
    const std::size_t count = m_args.plan->counts[i];
    backward_kernel<<<blocks_for(count), k_threads, 0, m_stream>>>(g, count, up, up_count, act);
    AISP_CHECK_LAUNCH();
  }
  void output(const float* g0, std::size_t g0_count) {
    output_kernel<<<blocks_for(m_args.plan->n), k_threads, 0, m_stream>>>(m_args.out, m_args.plan->n, g0,
                                                                          g0_count);
    AISP_CHECK_LAUNCH();
  }

 protected:
  const Args& m_args;
  StepMemory& m_memory;
  cudaStream_t m_stream;
};

// The same, sampling the device's free memory after every allocation.
class FootprintOps : public DeviceStepOps {
 public:
  FootprintOps(const Args& a, StepMemory& memory, cudaStream_t stream, std::size_t free_before)
      : DeviceStepOps(a, memory, stream), m_free_before(free_before), m_lowest_free(free_before) {}
  float* allocate(std::size_t count) {
    float* p = DeviceStepOps::allocate(count);
    std::size_t free_bytes = 0, total_bytes = 0;
    AISP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    m_lowest_free = std::min(m_lowest_free, free_bytes);
    return p;
  }
  std::size_t growth() const { return m_free_before - m_lowest_free; }

 private:
  std::size_t m_free_before;
  std::size_t m_lowest_free;
};

}  // namespace

void enqueue_training_step(const Args& a, StepMemory& memory, cudaStream_t stream) {
  DeviceStepOps ops(a, memory, stream);
  run_step(*a.plan, a.x, ops);
}

std::size_t measure_step_footprint(const Args& a, StepMemory& memory, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::size_t free_before = 0, total_bytes = 0;
  AISP_CUDA_CHECK(cudaMemGetInfo(&free_before, &total_bytes));
  FootprintOps ops(a, memory, stream, free_before);
  run_step(*a.plan, a.x, ops);
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ops.growth();
}

}  // namespace aisp::ch13::allocator
