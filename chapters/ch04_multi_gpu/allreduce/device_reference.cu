// ch04:allreduce — the trusted reference: one thread per element on rank 0's GPU loads the element of
// every rank's input (over peer access) and adds them in rank order, as host_allreduce does. Slow and
// obviously right; check_reference_on_host compares it with the host at the test size.
#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"
#include "chapters/ch04_multi_gpu/common/rank_sum.cuh"

namespace aisp::ch04::allreduce {

void launch_reference(const Args& a, float* ref, cudaStream_t stream) {
  RankTerms inputs;
  for (int r = 0; r < a.ranks; ++r) inputs.term[r] = a.in[r];
  launch_rank_sum(inputs, a.ranks, ref, a.n, a.sm_count, a.max_threads_per_sm, stream);
}

}  // namespace aisp::ch04::allreduce
