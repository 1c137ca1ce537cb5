// ch04:allreduce — the trusted reference: one thread per element on rank 0's GPU loads the element of
// every rank's input (over peer access) and adds them in rank order, as host_allreduce does. Slow and
// obviously right; check_reference_on_host compares it with the host at the test size.
#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"

namespace aisp::ch04::allreduce {
namespace {

struct Inputs {
  const float* in[k_max_ranks];
};

__global__ void reference_kernel(Inputs inputs, int ranks, float* __restrict__ ref, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float sum = inputs.in[0][i];
    for (int r = 1; r < ranks; ++r) sum += inputs.in[r][i];
    ref[i] = sum;
  }
}

}  // namespace

void launch_reference(const Args& a, float* ref, cudaStream_t stream) {
  if (a.n == 0) return;
  Inputs inputs{};
  for (int r = 0; r < a.ranks; ++r) inputs.in[r] = a.in[r];
  constexpr int threads = 256;
  reference_kernel<<<full_wave_blocks(a, threads), threads, 0, stream>>>(inputs, a.ranks, ref, a.n);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch04::allreduce
