// The one error vocabulary for CUDA calls (docs/style.md, rule 13). Each macro captures the expression,
// file and line and throws aisp::CudaError; callers decide whether the failure costs a variant or a run.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace aisp {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), m_code(code) {}
  cudaError_t code() const { return m_code; }

 private:
  cudaError_t m_code;
};

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);

}  // namespace aisp

#define AISP_CUDA_CHECK(expr)                                                   \
  do {                                                                          \
    const cudaError_t aisp_status_ = (expr);                                    \
    if (aisp_status_ != cudaSuccess) {                                          \
      ::aisp::throw_cuda_error(aisp_status_, #expr, __FILE__, __LINE__);        \
    }                                                                           \
  } while (0)

// After every <<<...>>>: a bad launch configuration is reported here, at the launching line; an error
// inside the kernel surfaces at the next synchronization.
#define AISP_CHECK_LAUNCH() AISP_CUDA_CHECK(cudaGetLastError())
