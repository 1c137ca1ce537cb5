// ch04:tensor_parallel_gemm — the trusted reference, on rank 0's GPU. Each rank's partial: its W1 and W2
// copied to rank 0, then GEMM1 over all tokens, the GELU kernel and GEMM2 (the reference's cuBLASLt plans,
// the shapes 01 runs) on rank 0's X, the same as every rank's. Y: one thread per element adds the R bf16
// partials in fp32 in rank order, as host_rank_sum does, from the reference's partials (phase 0) or from the
// stand-ins each rank holds, read over peer access (phase 2), and rounds once; each rank's reference is its
// own rows of that. Nothing here shares the steps' schedule (streams, events, chunks, NCCL, the gathered
// X's order): a step that orders its work or its tokens wrongly cannot agree with it.
// check_reference_on_host compares every reference with the host's fp64 at the test size.
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"

namespace aisp::ch04::tensor_parallel_gemm {
namespace {

// sum[i] = (first ? 0 : sum[i]) + p[i]: one rank's term, added in fp32 after the ranks before it.
__global__ void accumulate_kernel(float* __restrict__ sum, const bf16* __restrict__ p, std::size_t n, bool first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float term = __bfloat162float(p[i]);
    sum[i] = first ? term : sum[i] + term;
  }
}

// y[i] = sum[i] rounded to bf16, to nearest even: the output's one rounding.
__global__ void round_kernel(const float* __restrict__ sum, bf16* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = __float2bfloat16_rn(sum[i]);
  }
}

constexpr int k_threads = 256;

void accumulate(const Args& a, float* sum, const bf16* p, bool first, cudaStream_t stream) {
  const std::size_t n = a.shape.activation_elements();
  accumulate_kernel<<<grid_for(a, n, k_threads), k_threads, 0, stream>>>(sum, p, n, first);
  AISP_CHECK_LAUNCH();
}

// Rank r's partial, all tokens, into `part` (on rank 0's GPU).
void reference_partial(const Args& a, const ReferenceArgs& ref, int r, bf16* part, cudaStream_t stream) {
  const std::size_t bytes = a.shape.weight_elements() * sizeof(bf16);
  AISP_CUDA_CHECK(cudaMemcpyPeerAsync(ref.stage_w1, a.device[0], a.w1[r], a.device[r], bytes, stream));
  AISP_CUDA_CHECK(cudaMemcpyPeerAsync(ref.stage_w2, a.device[0], a.w2[r], a.device[r], bytes, stream));
  ref.up->run(a.x[0], ref.stage_w1, ref.stage_h, stream);
  launch_gelu(a, ref.stage_h, static_cast<std::size_t>(a.shape.tokens) * a.shape.ffn_per_rank(), stream);
  ref.down->run(ref.stage_h, ref.stage_w2, part, stream);
}

}  // namespace

void launch_reference(const Args& a, const ReferenceArgs& ref, cudaStream_t stream) {
  const int ranks = a.ranks();
  if (a.phase == Phase::compute) {
    for (int r = 0; r < ranks; ++r) reference_partial(a, ref, r, ref.part[r], stream);
    return;
  }
  for (int r = 0; r < ranks; ++r) {
    const bf16* term = a.part[r];  // phase 2: rank r's stand-ins, over peer access
    if (a.phase == Phase::step) {
      reference_partial(a, ref, r, ref.stage_part, stream);
      term = ref.stage_part;
    }
    accumulate(a, ref.sum, term, r == 0, stream);
  }
  const std::size_t n = a.shape.own_elements();
  for (int r = 0; r < ranks; ++r) {
    round_kernel<<<grid_for(a, n, k_threads), k_threads, 0, stream>>>(ref.sum + a.row(own_token(a.shape, r)), ref.y[r],
                                                                      n);
    AISP_CHECK_LAUNCH();
  }
}

}  // namespace aisp::ch04::tensor_parallel_gemm
