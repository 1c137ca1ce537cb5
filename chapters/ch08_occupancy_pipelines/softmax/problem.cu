// ch08:softmax — the trusted reference on the device, and the check of it against the host reference.
#include "chapters/ch08_occupancy_pipelines/softmax/problem.hpp"
#include "chapters/ch08_occupancy_pipelines/softmax/reference.hpp"
#include "chapters/ch08_occupancy_pipelines/softmax/reference_kernel.cuh"

namespace aisp::ch08::softmax {

void launch_reference(const __nv_bfloat16* x, __nv_bfloat16* ref, int rows, int cols, cudaStream_t stream) {
  reference_kernel::launch(x, ref, rows, cols, stream);
}

std::string SoftmaxProblem::check_reference_on_host(cudaStream_t stream) {
  const std::vector<double> x = to_host(inputs().front(), stream);
  const std::vector<double> ref = to_host(references().front(), stream);
  return compare_on_host("y_ref", ref, softmax_rows(x, m_rows, m_cols), tolerance());
}

}  // namespace aisp::ch08::softmax
