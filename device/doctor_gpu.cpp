// The GPU half of `aisp doctor`: gathers what the GPU rules in core/doctor/doctor_rules.cpp judge. NVML
// gives the per-GPU state, the CUDA runtime gives the version aisp was built with and the version
// the installed driver supports, and sysfs gives the NUMA node of each GPU's PCI device. Nothing
// here decides anything, so that every rule stays testable on a machine without a GPU.
#include <cuda_runtime_api.h>

#include <string>

#include "core/doctor/doctor.hpp"
#include "device/nvml.hpp"

namespace aisp {

namespace {

// sysfs first: it is where the kernel records which node the PCI device hangs off, and it exists on
// every Linux machine; NVML's memory affinity only fills in when sysfs has nothing.
void complete_numa_node(const doctor::HostContext& ctx, GpuSnapshot& s) {
  if (!s.pci_bus_id) return;
  std::string why;
  const auto node = doctor::read_pci_numa_node(ctx, *s.pci_bus_id, &why);
  if (node && (*node >= 0 || !s.numa_node)) {
    s.numa_node = *node;
    s.unavailable.erase("numa_node");
  } else if (!node && !s.numa_node) {
    s.unavailable["numa_node"] += (s.unavailable["numa_node"].empty() ? "" : "; ") + why;
  }
}

}  // namespace

GpuInventory read_gpu_inventory(const std::filesystem::path& root) {
  GpuInventory inv;
  int version = 0;
  // Both calls work without a GPU: the runtime version is compiled in, and cudaDriverGetVersion
  // returns 0 when no driver is installed rather than failing.
  if (const cudaError_t e = cudaRuntimeGetVersion(&version); e == cudaSuccess) {
    inv.cuda_runtime_version = version;
  } else {
    inv.cuda_error = std::string("cudaRuntimeGetVersion: ") + cudaGetErrorString(e);
  }
  version = 0;
  if (const cudaError_t e = cudaDriverGetVersion(&version); e == cudaSuccess) {
    inv.cuda_driver_version = version;
  } else if (!inv.cuda_error) {
    inv.cuda_error = std::string("cudaDriverGetVersion: ") + cudaGetErrorString(e);
  }

  std::string why;
  const auto nvml = Nvml::load(&why);
  if (!nvml) {
    inv.nvml_error = why;
    return inv;
  }
  inv.nvml_missing_symbols = nvml->missing_symbols();
  inv.driver_version = nvml->driver_version();
  inv.nvml_cuda_driver_version = nvml->cuda_driver_version();

  std::string count_why;
  const int n = nvml->device_count(&count_why);
  if (n == 0 && !count_why.empty()) {
    inv.nvml_error = "NVML cannot list GPUs: " + count_why;
    return inv;
  }
  doctor::HostContext ctx;
  ctx.root = root;
  for (int i = 0; i < n; ++i) {
    GpuSnapshot s = nvml->snapshot(i);
    complete_numa_node(ctx, s);
    inv.gpus.push_back(std::move(s));
  }
  return inv;
}

}  // namespace aisp
