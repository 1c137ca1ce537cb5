// ch07:copy:vendor_memcpy — cudaMemcpyAsync device to device: the reference every copy is measured by.
//
// The driver's own copy (it runs as a kernel on the SMs for device-to-device copies). The hand-written
// steps report "% of vendor" against it.
// Run: aisp bench run --targets ch07:copy:vendor_memcpy
#include "chapters/ch07_memory_access/copy/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::copy::vendor {

void launch(const Args& a, cudaStream_t stream) {
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.dst, a.src, a.n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 0, .slug = "memcpy", .kind = VariantKind::vendor,
                      .summary = "cudaMemcpyAsync device to device");

}  // namespace aisp::ch07::copy::vendor
