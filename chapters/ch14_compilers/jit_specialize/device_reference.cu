// ch14:jit_specialize — the device reference the gate trusts at full size (checked against reference.hpp's
// nested loops at test sizes by Correctness.DeviceReferencesMatchTheHost).
//
// Deliberately the other way round from the variants: a grid-stride loop over the *input*, each element
// scattered to its output place, with 64-bit arithmetic throughout. A shared indexing mistake would have
// to be made twice, in two different formulations, to go unnoticed.
#include "chapters/ch14_compilers/jit_specialize/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch14::jit_specialize {
namespace {

__global__ void head_split_reference_kernel(const std::uint16_t* __restrict__ in, std::uint16_t* __restrict__ out,
                                            std::uint64_t batch, std::uint64_t seq, std::uint64_t heads,
                                            std::uint64_t head_dim) {
  const std::uint64_t count = batch * seq * heads * head_dim;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    // i = ((b * seq + s) * heads + h) * head_dim + d
    const std::uint64_t d = i % head_dim;
    const std::uint64_t h = (i / head_dim) % heads;
    const std::uint64_t s = (i / (head_dim * heads)) % seq;
    const std::uint64_t b = i / (head_dim * heads * seq);
    out[((b * heads + h) * seq + s) * head_dim + d] = in[i];
  }
}

}  // namespace

void head_split_on_device(const std::uint16_t* in, std::uint16_t* out, std::uint32_t batch, std::uint32_t seq,
                          std::uint32_t heads, std::uint32_t head_dim, cudaStream_t stream) {
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  head_split_reference_kernel<<<sms * 8, 256, 0, stream>>>(in, out, batch, seq, heads, head_dim);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch14::jit_specialize
