// RAII device allocation. Plain cudaMalloc (never managed memory: see the device notes on oversubscription).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "device/cuda_check.hpp"

namespace aisp {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : m_count(count) {
    if (count > 0) AISP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_data), count * sizeof(T)));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : m_data(std::exchange(o.m_data, nullptr)), m_count(std::exchange(o.m_count, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      m_data = std::exchange(o.m_data, nullptr);
      m_count = std::exchange(o.m_count, 0);
    }
    return *this;
  }

  T* data() const { return m_data; }
  std::size_t size() const { return m_count; }
  std::size_t bytes() const { return m_count * sizeof(T); }

  void reset() {
    if (m_data) cudaFree(m_data);  // errors on free are sticky ones already reported elsewhere
    m_data = nullptr;
    m_count = 0;
  }

 private:
  T* m_data = nullptr;
  std::size_t m_count = 0;
};

}  // namespace aisp
