// ch04:overlap — the trusted reference, on rank 0's GPU. The local gradients: rank r's X_l and dY_l copied
// to rank 0 one layer at a time, then the same cuBLASLt plan the steps run (WgradGemm) into that rank's
// reference. The reduced gradients: one thread per element adds the R terms in rank order, as
// host_rank_sum does, from the reference's local gradients (phase 0) or from the stand-ins each rank holds,
// read over peer access (phase 2); every rank's reference is then a copy of that sum. Nothing here shares
// the steps' schedule (streams, events, buckets, NCCL): a step that orders its work wrongly cannot agree
// with it. check_reference_on_host compares every reference with the host's fp64 at the test size.
#include "chapters/ch04_multi_gpu/common/rank_sum.cuh"
#include "chapters/ch04_multi_gpu/overlap/problem.hpp"

namespace aisp::ch04::overlap {

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
  RankTerms t;
  for (int r = 0; r < a.ranks; ++r) t.term[r] = a.phase == Phase::step ? ref.grad[r] : a.grad[r];
  const std::size_t n = s.gradient_elements();
  launch_rank_sum(t, a.ranks, ref.out[0], n, a.sm_count, a.max_threads_per_sm, stream);
  for (int r = 1; r < a.ranks; ++r) {
    AISP_CUDA_CHECK(cudaMemcpyAsync(ref.out[r], ref.out[0], n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
}

}  // namespace aisp::ch04::overlap
