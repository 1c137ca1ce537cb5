#include "device/cuda_check.hpp"

#include <fmt/format.h>

namespace aisp {

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  throw CudaError(code, fmt::format("{} ({}) in {} at {}:{}", cudaGetErrorString(code),
                                    cudaGetErrorName(code), expr, file, line));
}

}  // namespace aisp
