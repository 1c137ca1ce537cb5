// ch13:allocator — the device reference the gate trusts (checked against reference.hpp's host step at the
// test size by Correctness.DeviceReferencesMatchTheHost).
//
// No allocator at all: the activations lie one after another in one buffer the problem allocated once, the
// gradients alternate between two halves of another, and each layer is one plain grid-stride kernel. Same
// roundings in the same order as the variants, so the comparison is exact.
#include "chapters/ch13_profiling_memory/allocator/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch13::allocator {
namespace {

// dst[j] = fma(1/2, a[j mod a_count], b[j]), or with a constant `bias` in place of b when b is null.
__global__ void layer_reference_kernel(float* __restrict__ dst, std::size_t count, const float* a,
                                       std::size_t a_count, const float* b, float bias) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride) {
    dst[j] = __fmaf_rn(k_decay, a[j % a_count], b != nullptr ? b[j] : bias);
  }
}

__global__ void gather_reference_kernel(float* __restrict__ out, std::size_t n, const float* __restrict__ g0,
                                        std::size_t g0_count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    out[k] = g0[k % g0_count];
  }
}

}  // namespace

void step_on_device(const float* x, const StepPlan& plan, float* acts, float* grads, float* out,
                    cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned blocks = static_cast<unsigned>(sms) * 4;
  const std::size_t layers = plan.counts.size();
  std::vector<float*> act(layers);
  std::size_t largest = 0;
  for (std::size_t i = 0, offset = 0; i < layers; offset += plan.counts[i], ++i) {
    act[i] = acts + offset;
    largest = std::max(largest, plan.counts[i]);
  }
  for (std::size_t i = 0; i < layers; ++i) {
    const float* src = i == 0 ? x : act[i - 1];
    const std::size_t src_count = i == 0 ? plan.n : plan.counts[i - 1];
    layer_reference_kernel<<<blocks, 256, 0, stream>>>(act[i], plan.counts[i], src, src_count, nullptr,
                                                       layer_bias(i));
    AISP_CHECK_LAUNCH();
  }
  const float* up = act[layers - 1];
  std::size_t up_count = plan.counts[layers - 1];
  for (std::size_t i = layers; i-- > 0;) {
    float* g = grads + (i % 2) * largest;  // never the half that holds `up` (layer i + 1's)
    layer_reference_kernel<<<blocks, 256, 0, stream>>>(g, plan.counts[i], up, up_count, act[i], 0.0f);
    AISP_CHECK_LAUNCH();
    up = g;
    up_count = plan.counts[i];
  }
  gather_reference_kernel<<<blocks, 256, 0, stream>>>(out, plan.n, up, up_count);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch13::allocator
