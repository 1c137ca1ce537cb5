// ch01:launch_batching — one cuBLAS handle per variant, made in setup() and destroyed with the variant,
// so that handle creation (milliseconds: it loads kernels and allocates a workspace) is never timed.
#pragma once

#include <cublas_v2.h>

#include "device/cublas_check.hpp"

namespace aisp::ch01::launch_batching {

class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (m_handle) cublasDestroy(m_handle);
  }

  void create() {
    if (!m_handle) AISP_CUBLAS_CHECK(cublasCreate(&m_handle));
  }
  // The harness's stream for this launch: every call below then runs on it.
  cublasHandle_t on(cudaStream_t stream) {
    AISP_CUBLAS_CHECK(cublasSetStream(m_handle, stream));
    return m_handle;
  }

 private:
  cublasHandle_t m_handle = nullptr;
};

}  // namespace aisp::ch01::launch_batching
