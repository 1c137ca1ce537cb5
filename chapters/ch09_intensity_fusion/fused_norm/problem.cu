// ch09:fused_norm — the trusted reference on the device, and the check of it against the host reference.
#include "chapters/ch09_intensity_fusion/fused_norm/problem.hpp"
#include "chapters/ch09_intensity_fusion/fused_norm/reference.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch09::fused_norm {
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

// One block per row, fp64 throughout. The sum of two bf16 values is exact in double; it is rounded to
// bf16 once (h_ref), and the statistics and y use that rounded value (problem.hpp says why).
__global__ void add_rmsnorm_reference_kernel(Args a, __nv_bfloat16* h_ref, __nv_bfloat16* y_ref) {
  __shared__ double scratch[k_ref_threads];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * a.hidden;
  double squares = 0;
  for (int c = threadIdx.x; c < a.hidden; c += k_ref_threads) {
    const double sum = static_cast<double>(__bfloat162float(a.x[base + c])) +
                       static_cast<double>(__bfloat162float(a.residual[base + c]));
    const __nv_bfloat16 h = __double2bfloat16(sum);
    h_ref[base + c] = h;
    const double hd = __bfloat162float(h);
    squares += hd * hd;
  }
  const double rstd =
      1.0 / sqrt(reference_block_sum(squares, scratch) / a.hidden + static_cast<double>(k_eps));
  // Each thread rereads only the h values it wrote itself: no barrier needed for them.
  for (int c = threadIdx.x; c < a.hidden; c += k_ref_threads) {
    const double hd = __bfloat162float(h_ref[base + c]);
    y_ref[base + c] = __double2bfloat16(hd * rstd * static_cast<double>(__bfloat162float(a.weight[c])));
  }
}

}  // namespace

void launch_reference(const Args& a, __nv_bfloat16* h_ref, __nv_bfloat16* y_ref, cudaStream_t stream) {
  add_rmsnorm_reference_kernel<<<a.tokens, k_ref_threads, 0, stream>>>(a, h_ref, y_ref);
  AISP_CHECK_LAUNCH();
}

std::string FusedNormProblem::check_reference_on_host(cudaStream_t stream) {
  const auto in = inputs();
  const auto refs = references();
  const AddNormRows want = add_rmsnorm_rows(to_host(in[0], stream), to_host(in[1], stream),
                                            to_host(in[2], stream), m_tokens, m_hidden,
                                            static_cast<double>(k_eps));
  std::string diff = compare_on_host("h_ref", to_host(refs[0], stream), want.h, tolerance());
  if (diff.empty()) diff = compare_on_host("y_ref", to_host(refs[1], stream), want.y, tolerance());
  return diff;
}

}  // namespace aisp::ch09::fused_norm
