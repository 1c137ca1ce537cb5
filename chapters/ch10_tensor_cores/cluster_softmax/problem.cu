// ch10:cluster_softmax — the trusted reference on the device (ch08:softmax's kernel: one block per row,
// fp64, accurate exp), and the check of it against the host reference.
#include "chapters/ch08_occupancy_pipelines/softmax/reference_kernel.cuh"
#include "chapters/ch10_tensor_cores/cluster_softmax/problem.hpp"
#include "chapters/ch10_tensor_cores/cluster_softmax/reference.hpp"

namespace aisp::ch10::cluster_softmax {

void launch_reference(const __nv_bfloat16* x, __nv_bfloat16* ref, int rows, int cols, cudaStream_t stream) {
  ch08::softmax::reference_kernel::launch(x, ref, rows, cols, stream);
}

std::string ClusterSoftmaxProblem::check_reference_on_host(cudaStream_t stream) {
  const std::vector<double> x = to_host(inputs().front(), stream);
  const std::vector<double> ref = to_host(references().front(), stream);
  return compare_on_host("y_ref", ref, softmax_rows(x, m_rows, m_cols), tolerance());
}

}  // namespace aisp::ch10::cluster_softmax
