// ch04:collectives — the trusted reference: one thread per element of rank r's output, on rank 0's GPU,
// loads the element(s) the definition names (layout.hpp's header) from every rank's input over peer
// access; reduce-scatter adds its terms in rank order, as host_reduce_scatter does. Slow and obviously
// right: it shares no index arithmetic with step 01's copy list (receives()), and check_reference_on_host
// compares it with the host at the test size.
#include "chapters/ch04_multi_gpu/collectives/problem.hpp"

namespace aisp::ch04::collectives {
namespace {

struct Inputs {
  const float* in[k_max_ranks];
};

// out_r[i] for each op; c is the layout's chunk.
__device__ float gathered(const Inputs& x, std::size_t c, std::size_t i) { return x.in[i / c][i % c]; }

__device__ float summed(const Inputs& x, int ranks, int rank, std::size_t c, std::size_t i) {
  const std::size_t at = static_cast<std::size_t>(rank) * c + i;
  float sum = x.in[0][at];
  for (int j = 1; j < ranks; ++j) sum += x.in[j][at];
  return sum;
}

__device__ float exchanged(const Inputs& x, int rank, std::size_t c, std::size_t i) {
  return x.in[i / c][static_cast<std::size_t>(rank) * c + i % c];
}

__global__ void reference_kernel(Inputs x, Collective op, int ranks, int rank, std::size_t c, float* __restrict__ ref,
                                 std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float v = 0.0f;
    switch (op) {
      case Collective::all_gather: v = gathered(x, c, i); break;
      case Collective::reduce_scatter: v = summed(x, ranks, rank, c, i); break;
      case Collective::all_to_all: v = exchanged(x, rank, c, i); break;
      case Collective::broadcast: v = x.in[0][i]; break;
      case Collective::send_recv: v = x.in[left_of(rank, ranks)][i]; break;
      default: v = __int_as_float(0x7fffffff); break;  // NaN: never passes the gate
    }
    ref[i] = v;
  }
}

}  // namespace

void launch_reference(const Args& a, int rank, float* ref, cudaStream_t stream) {
  const Layout& l = a.layout;
  if (l.out_count == 0) return;
  Inputs x{};
  for (int r = 0; r < l.ranks; ++r) x.in[r] = a.in[r];
  constexpr int threads = 256;
  reference_kernel<<<grid_for(a, l.out_count, threads), threads, 0, stream>>>(x, l.op, l.ranks, rank, l.chunk, ref,
                                                                             l.out_count);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch04::collectives
