// The CUDA device current on the calling thread, switched for a scope. A LlamaRunner is built on the
// device current at its construction, and its stream, handles and graphs belong to that device's
// context: whoever owns runners on several GPUs (the two-GPU ladders, `aisp serve --disaggregate`)
// makes each one's device current to build it and to release it.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

// Makes `device` current for a scope and restores the caller's device after it.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    AISP_CUDA_CHECK(cudaGetDevice(&m_saved));
    AISP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() { (void)cudaSetDevice(m_saved); }  // no throw from a destructor
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int m_saved = 0;
};

// For destructors: runs `release` with `device` current and restores the caller's device, without
// throwing (CurrentDevice's checks throw). If the switch fails, `release` still runs, on whatever
// device is current: leaking is not better.
template <class F>
void release_on_device(int device, F&& release) noexcept {
  int saved = 0;
  const bool switched = cudaGetDevice(&saved) == cudaSuccess && cudaSetDevice(device) == cudaSuccess;
  std::forward<F>(release)();
  if (switched) (void)cudaSetDevice(saved);
}

}  // namespace aisp::serving::gpu
