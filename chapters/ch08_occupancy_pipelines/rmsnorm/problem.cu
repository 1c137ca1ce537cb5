// ch08:rmsnorm — the trusted reference on the device, and the check of it against the host reference.
#include "chapters/ch08_occupancy_pipelines/rmsnorm/problem.hpp"
#include "chapters/ch08_occupancy_pipelines/rmsnorm/reference.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch08::rmsnorm {
namespace {

constexpr int k_ref_threads = 256;

// Block-wide sum through shared memory, plain tree: slow and obviously right.
__device__ double reference_block_sum(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = k_ref_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  return scratch[0];
}

// One block per row, fp64 throughout: the answer every step is compared with.
__global__ void rmsnorm_reference_kernel(Args a, __nv_bfloat16* ref) {
  __shared__ double scratch[k_ref_threads];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * a.cols;
  double squares = 0;
  for (int c = threadIdx.x; c < a.cols; c += k_ref_threads) {
    const double v = __bfloat162float(a.x[base + c]);
    squares += v * v;
  }
  const double rstd = 1.0 / sqrt(reference_block_sum(squares, scratch) / a.cols + static_cast<double>(k_eps));
  for (int c = threadIdx.x; c < a.cols; c += k_ref_threads) {
    const double v = __bfloat162float(a.x[base + c]);
    ref[base + c] = __double2bfloat16(v * rstd * __bfloat162float(a.weight[c]));
  }
}

}  // namespace

void launch_reference(const Args& a, __nv_bfloat16* ref, cudaStream_t stream) {
  rmsnorm_reference_kernel<<<a.rows, k_ref_threads, 0, stream>>>(a, ref);
  AISP_CHECK_LAUNCH();
}

std::string RmsnormProblem::check_reference_on_host(cudaStream_t stream) {
  const auto in = inputs();
  const std::vector<double> want =
      rmsnorm_rows(to_host(in[0], stream), to_host(in[1], stream), m_rows, m_cols, static_cast<double>(k_eps));
  return compare_on_host("y_ref", to_host(references().front(), stream), want, tolerance());
}

}  // namespace aisp::ch08::rmsnorm
