// Facts about one GPU, read from the device by device/device_info.cpp. Plain data so that core/ can put
// them in manifests and reports without CUDA headers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace aisp {

struct DeviceFacts {
  int index = 0;
  std::string name;
  std::string uuid;          // "GPU-xxxxxxxx-..." as nvidia-smi prints it
  std::string pci_bus_id;    // "0000:1b:00.0"
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int regs_per_sm = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_per_sm_bytes = 0;
  std::int64_t smem_per_block_optin_bytes = 0;
  std::int64_t global_mem_bytes = 0;
  int sm_clock_khz = 0;      // peak, as the runtime reports it
  int mem_clock_khz = 0;     // peak
  int mem_bus_width_bits = 0;
  int driver_version = 0;    // CUDA driver API version, e.g. 13000
  int runtime_version = 0;   // CUDA runtime version linked into aisp
  int device_count = 0;      // GPUs visible to this process

  int cc() const { return cc_major * 10 + cc_minor; }
};

nlohmann::ordered_json to_json(const DeviceFacts& d);

}  // namespace aisp
