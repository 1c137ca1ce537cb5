// AISP_CUBLAS_CHECK: the error vocabulary of device/cuda_check.hpp for cuBLAS and cuBLASLt calls
// (docs/style.md, rule 13), usable from .cpp and .cu files. Kept apart so that only code that uses cuBLAS includes its headers.
#pragma once

#include <cublas_api.h>
#include <cublasLt.h>

#include <stdexcept>
#include <string>

namespace aisp {

class CublasError : public std::runtime_error {
 public:
  CublasError(cublasStatus_t status, const std::string& what) : std::runtime_error(what), m_status(status) {}
  cublasStatus_t status() const { return m_status; }

 private:
  cublasStatus_t m_status;
};

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  // Plain std::string (no fmt): this header is also included from .cu files, which nvcc compiles
  // without the header-only fmt.
  throw CublasError(status, std::string(cublasLtGetStatusString(status)) + " (" +
                                std::to_string(static_cast<int>(status)) + ") in " + expr + " at " + file +
                                ":" + std::to_string(line));
}

}  // namespace aisp

#define AISP_CUBLAS_CHECK(expr)                                                 \
  do {                                                                          \
    const cublasStatus_t aisp_cublas_status_ = (expr);                          \
    if (aisp_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                         \
      ::aisp::throw_cublas_error(aisp_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)
