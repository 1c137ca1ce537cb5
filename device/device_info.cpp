#include "device/device_info.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "device/cuda_check.hpp"

namespace aisp {

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  if (st != cudaSuccess) {
    if (why) *why = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(st), cudaGetErrorName(st));
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount found 0 devices";
  return n;
}

namespace {

std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

int attribute(cudaDeviceAttr attr, int dev) {
  int v = 0;
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, dev));
  return v;
}

}  // namespace

DeviceFacts query_device(int index) {
  cudaDeviceProp p{};
  AISP_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceFacts d;
  d.index = index;
  d.name = p.name;
  d.uuid = uuid_string(p.uuid);
  d.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  d.regs_per_sm = p.regsPerMultiprocessor;
  d.l2_bytes = p.l2CacheSize;
  d.smem_per_sm_bytes = static_cast<std::int64_t>(p.sharedMemPerMultiprocessor);
  d.smem_per_block_optin_bytes = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
  d.global_mem_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  // CUDA 13 removed clockRate and memoryClockRate from cudaDeviceProp; the attributes remain.
  d.sm_clock_khz = attribute(cudaDevAttrClockRate, index);
  d.mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, index);
  d.mem_bus_width_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, index);
  AISP_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  AISP_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  AISP_CUDA_CHECK(cudaGetDeviceCount(&d.device_count));
  return d;
}

}  // namespace aisp
