// RAII device allocation. Plain cudaMalloc (never managed memory: see the device notes on oversubscription).
// RAII pinned host allocation (PinnedBuffer, below), in the same shape.
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

// RAII page-locked (pinned) host allocation, made with cudaHostAlloc. Pinned memory is what lets
// cudaMemcpyAsync run asynchronously and at the link's rate: from a pageable buffer the driver stages the
// bytes through its own pinned buffer, and the call may block the host. With unified addressing (every
// 64-bit Linux process) the same pointer is valid in kernels, which is how the gate fills, poisons, compares
// and hashes pinned inputs and outputs on the GPU.
//
// `flags` are cudaHostAlloc's (cudaHostAllocDefault, or an OR of cudaHostAllocPortable, cudaHostAllocMapped
// and cudaHostAllocWriteCombined); a caller that needs the device pointer of mapped memory asks
// cudaHostGetDevicePointer for it. Pinning is a property of the allocation: memory that must stay
// pageable is never a PinnedBuffer.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count, unsigned int flags = cudaHostAllocDefault) {
    if (count > 0) {
      void* p = nullptr;
      AISP_CUDA_CHECK(cudaHostAlloc(&p, count * sizeof(T), flags));
      m_data = static_cast<T*>(p);
    }
    m_count = count;
  }
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : m_data(std::exchange(o.m_data, nullptr)), m_count(std::exchange(o.m_count, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      m_data = std::exchange(o.m_data, nullptr);
      m_count = std::exchange(o.m_count, 0);
    }
    return *this;
  }

  T* data() const { return m_data; }
  std::size_t count() const { return m_count; }
  std::size_t size() const { return m_count; }  // count(), under DeviceBuffer's name for it
  std::size_t bytes() const { return m_count * sizeof(T); }

  void reset() noexcept {
    if (m_data) cudaFreeHost(m_data);  // errors on free are sticky ones already reported elsewhere
    m_data = nullptr;
    m_count = 0;
  }

 private:
  T* m_data = nullptr;
  std::size_t m_count = 0;
};

}  // namespace aisp
