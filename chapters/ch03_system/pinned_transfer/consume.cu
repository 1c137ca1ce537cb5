// ch03:pinned_transfer — the kernel that consumes the uploaded data, identical for every step of the
// ladder (the ladder is about the copy and what overlaps it, not about this kernel).
#include "chapters/ch03_system/pinned_transfer/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch03::pinned_transfer {
namespace {

constexpr int k_threads = 256;

// One element per thread; its chain of `fma` dependent fmas. Unrolled by 8 so that the loop's counter
// and branch cost one instruction in eight FMAs rather than three per FMA; the chains of the ~2,000
// resident threads per SM hide the FMA latency.
__global__ void consume_kernel(float* __restrict__ data, std::size_t count, int fma) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i >= count) return;
  float y = data[i];
#pragma unroll 8
  for (int j = 0; j < fma; ++j) y = fmaf(y, k_decay, k_offset);
  data[i] = y;
}

}  // namespace

void enqueue_consume(float* data, std::size_t count, int fma, cudaStream_t stream) {
  if (fma == 0 || count == 0) return;  // a plain upload: nothing to consume
  const auto blocks = static_cast<unsigned>((count + k_threads - 1) / k_threads);
  consume_kernel<<<blocks, k_threads, 0, stream>>>(data, count, fma);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch03::pinned_transfer
