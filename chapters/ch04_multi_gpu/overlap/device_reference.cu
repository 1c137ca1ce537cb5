// ch04:overlap — the trusted reference, on rank 0's GPU. The local gradients: rank r's X_l and dY_l copied
// to rank 0 one layer at a time, then the same cuBLASLt plan the steps run (WgradGemm) into that rank's
// reference. The reduced gradients: one thread per element adds the R terms in rank order, as
// host_rank_sum does, from the reference's local gradients (phase 0) or from the stand-ins each rank holds,
// read over peer access (phase 2); every rank's reference is then a copy of that sum. Nothing here shares
// the steps' schedule (streams, events, buckets, NCCL): a step that orders its work wrongly cannot agree
// with it. check_reference_on_host compares every reference with the host's fp64 at the test size.
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap {
namespace {

struct Terms {
  const float* term[k_max_ranks];
};

// out[i] = ((term[0][i] + term[1][i]) + term[2][i]) + ...: rank order, fp32.
__global__ void rank_sum_kernel(Terms t, int ranks, float* __restrict__ out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float sum = t.term[0][i];
    for (int r = 1; r < ranks; ++r) sum += t.term[r][i];
    out[i] = sum;
  }
}

// One full wave of `threads`-thread blocks, no more than `n` elements need (as ch04:collectives' grid_for).
int grid_for(const Args& a, std::size_t n, int threads) {
  const std::size_t wave = static_cast<std::size_t>(a.sm_count) * (a.max_threads_per_sm / threads);
  const std::size_t needed = (n + threads - 1) / threads;
  return static_cast<int>(std::clamp<std::size_t>(needed, 1, std::max<std::size_t>(wave, 1)));
}

}  // namespace

void launch_reference(const Args& a, const ReferenceArgs& ref, cudaStream_t stream) {
  const Shape& s = a.shape;
  if (a.gemms()) {
    const std::size_t bytes = a.rows() * sizeof(__nv_bfloat16);
    for (int r = 0; r < a.ranks; ++r) {
      for (int l = 0; l < s.layers; ++l) {
        AISP_CUDA_CHECK(cudaMemcpyPeerAsync(ref.stage_dy, a.device[0], a.dy_of(r, l), a.device[r], bytes, stream));
        AISP_CUDA_CHECK(cudaMemcpyPeerAsync(ref.stage_x, a.device[0], a.x_of(r, l), a.device[r], bytes, stream));
        ref.gemm->run(ref.stage_dy, ref.stage_x, ref.grad[r] + l * s.layer_elements(), stream);
      }
    }
  }
  if (!a.reduces()) return;
  Terms t{};
  for (int r = 0; r < a.ranks; ++r) t.term[r] = a.phase == Phase::step ? ref.grad[r] : a.grad[r];
  const std::size_t n = s.gradient_elements();
  constexpr int threads = 256;
  rank_sum_kernel<<<grid_for(a, n, threads), threads, 0, stream>>>(t, a.ranks, ref.out[0], n);
  AISP_CHECK_LAUNCH();
  for (int r = 1; r < a.ranks; ++r) {
    AISP_CUDA_CHECK(cudaMemcpyAsync(ref.out[r], ref.out[0], n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
}

}  // namespace aisp::ch04::overlap
