// The CUDA device current on the calling thread, switched for a scope. A LlamaRunner is built on the
// device current at its construction, and its stream, handles and graphs belong to that device's
// context: whoever owns runners on several GPUs (the two-GPU ladders, `aisp serve --disaggregate`)
// makes each one's device current to build it and to release it.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
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

// A value computed once per CUDA device for one call site: kernel attributes (the dynamic shared-memory
// opt-in above 48 KiB) and the occupancy read after them belong to the device that was current when
// they were set, so a function-local `static` computed on GPU 0 leaves GPU 1 unprepared and its launch
// fails with cudaErrorInvalidValue (found by ch15:disaggregated's colocated step, prefill on both GPUs).
template <class T>
class PerDevice {
 public:
  // The value for the calling thread's current device: `make()` runs with that device current, once.
  template <class F>
  const T& get(F&& make) {
    int device = 0;
    AISP_CUDA_CHECK(cudaGetDevice(&device));
    const std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_values.find(device);
    if (it == m_values.end()) it = m_values.emplace(device, std::forward<F>(make)()).first;
    return it->second;
  }

 private:
  std::mutex m_mutex;
  std::map<int, T> m_values;
};

}  // namespace aisp::serving::gpu
