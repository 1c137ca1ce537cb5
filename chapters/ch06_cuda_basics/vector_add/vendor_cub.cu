// ch06:vector_add:vendor_cub — cub::DeviceTransform, NVIDIA's tuned elementwise transform (CCCL).
//
// The library path a CUDA C++ user reaches for instead of a hand-written kernel: CUB picks its own
// algorithm, block size and bytes in flight per thread for the device (on sm_90 it may stage the inputs
// through shared memory with bulk copies). The reference the ladder's steps are measured by.
// Run: aisp bench run --targets ch06:vector_add:vendor_cub
#include <cub/device/device_transform.cuh>
#include <cuda/std/functional>
#include <cuda/std/tuple>

#include "chapters/ch06_cuda_basics/vector_add/problem.hpp"

namespace aisp::ch06::vector_add::vendor {

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cub::DeviceTransform::Transform(::cuda::std::make_tuple(a.a, a.b), a.c,
                                                  static_cast<std::int64_t>(a.n), ::cuda::std::plus<float>{},
                                                  stream));
}

AISP_REGISTER_VARIANT(VectorAddProblem, launch, .step = 0, .slug = "cub", .kind = VariantKind::vendor,
                      .summary = "cub::DeviceTransform::Transform with cuda::std::plus<float>");

}  // namespace aisp::ch06::vector_add::vendor
