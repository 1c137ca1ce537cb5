// ch06:occupancy:01_one_per_thread — one element per thread, ceil(n / block) blocks (the baseline).
//
// What: the textbook kernel at the axis' block size: thread i computes y[i] = fma(alpha, x[i], beta).
// Why look at it here: its kernel needs few registers and no shared memory, so the occupancy the runtime
// predicts is 100% at every block size from 64 to 1024 (the warp slots bind, not registers); what the
// block size changes is how many blocks the scheduler must start (n / block of them, a million at 256)
// and how a block's tail wave fills the SMs. Compare the facts column with the times.
// Napkin math: 2.15 GB per launch at n = 2^28, ~0.5 ms at ~4.3 TB/s.
// Run: aisp bench run --targets ch06:occupancy:01_one_per_thread --axis block=256
#include "chapters/ch06_cuda_basics/occupancy/problem.hpp"

namespace aisp::ch06::occupancy::v01 {

__global__ void affine_one_per_thread_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(k_alpha, x[i], k_beta);
}

void launch(const Args& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.n + a.block - 1) / a.block);
  affine_one_per_thread_kernel<<<blocks, a.block, 0, stream>>>(a.x, a.y, a.n);
  AISP_CHECK_LAUNCH();
}

std::vector<Fact> facts(const Args& a) {
  return occupancy_facts(a, reinterpret_cast<const void*>(&affine_one_per_thread_kernel));
}

AISP_REGISTER_VARIANT_WITH_FACTS(OccupancyProblem, launch, facts, .step = 1, .slug = "one_per_thread",
                                 .kind = VariantKind::baseline,
                                 .summary = "one element per thread, ceil(n/block) blocks");

}  // namespace aisp::ch06::occupancy::v01
