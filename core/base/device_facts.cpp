#include "core/base/device_facts.hpp"

namespace aisp {

nlohmann::ordered_json to_json(const DeviceFacts& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"uuid", d.uuid},
          {"pci_bus_id", d.pci_bus_id},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"sm_count", d.sm_count},
          {"max_threads_per_sm", d.max_threads_per_sm},
          {"registers_per_sm", d.regs_per_sm},
          {"l2_bytes", d.l2_bytes},
          {"shared_memory_per_sm_bytes", d.smem_per_sm_bytes},
          {"shared_memory_per_block_optin_bytes", d.smem_per_block_optin_bytes},
          {"global_memory_bytes", d.global_mem_bytes},
          {"sm_clock_peak_khz", d.sm_clock_khz},
          {"memory_clock_peak_khz", d.mem_clock_khz},
          {"memory_bus_width_bits", d.mem_bus_width_bits},
          {"cuda_driver_version", d.driver_version},
          {"cuda_runtime_version", d.runtime_version},
          {"visible_device_count", d.device_count}};
}

}  // namespace aisp
