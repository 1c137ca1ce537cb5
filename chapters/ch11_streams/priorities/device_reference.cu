// ch11:priorities — the device reference of the critical chain (checked against reference.hpp's host chain
// at the test size by Correctness.DeviceReferencesMatchTheHost). The copy needs none: its reference is its
// input.
//
// One block, one thread per state value: p(x) once, then the chain's adds in order, in registers. The same
// roundings as `steps` separate kernels, since every step computes the same p(x) and adds it in turn.
#include "chapters/ch11_streams/priorities/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::priorities {
namespace {

__global__ void chain_reference_kernel(const float* __restrict__ x, float* __restrict__ state, int steps, int fmas) {
  const float v = x[threadIdx.x];
  float p = 1.0f;
  for (int j = 0; j < fmas; ++j) p = __fmaf_rn(p, v, 1.0f);
  float s = p;
  for (int k = 1; k < steps; ++k) s = __fadd_rn(s, p);
  state[threadIdx.x] = s;
}

}  // namespace

void chain_on_device(const float* x, float* state_ref, int steps, int fmas, cudaStream_t stream) {
  chain_reference_kernel<<<1, k_critical_threads, 0, stream>>>(x, state_ref, steps, fmas);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch11::priorities
