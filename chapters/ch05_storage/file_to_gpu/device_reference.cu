// ch05:file_to_gpu — the device reference the gate trusts at full size: the test file's bytes computed
// from their positions (core/ceilings/disk_read.hpp's pattern), without reading the file. Checked at the test size
// against the host's pattern and against the file itself by Correctness.DeviceReferencesMatchTheHost.
#include <stdexcept>

#include "chapters/ch05_storage/file_to_gpu/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch05::file_to_gpu {
namespace {

// One thread per 32-bit pattern word: one hash, up to four byte stores (the range starts 4 KiB-aligned,
// so word k of the range is word first / 4 + k of the file; only the last word may be cut short).
__global__ void pattern_bytes_kernel(std::uint8_t* __restrict__ out, std::size_t count, std::uint64_t first,
                                     std::uint64_t key) {
  const std::size_t words = (count + 3) / 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < words; k += stride) {
    const std::uint32_t w = pattern_file_word(first / 4 + k, key);
    for (std::size_t b = 0; b < 4 && 4 * k + b < count; ++b) out[4 * k + b] = static_cast<std::uint8_t>(w >> (8 * b));
  }
}

}  // namespace

void pattern_bytes_on_device(std::uint8_t* out, std::size_t count, std::uint64_t first, std::uint64_t key,
                             cudaStream_t stream) {
  if (first % 4 != 0) throw std::invalid_argument("pattern_bytes_on_device: the range must start on a word");
  if (count == 0) return;
  int device = 0, sms = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  pattern_bytes_kernel<<<sms * 8, 256, 0, stream>>>(out, count, first, key);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch05::file_to_gpu
