// A small NVML wrapper, loaded at run time with dlopen("libnvidia-ml.so.1") and never linked, so
// that aisp starts on machines without the NVIDIA driver and builds without nvml.h. Every entry
// point is resolved on its own: a symbol an old driver lacks costs only the fields it fills, and
// the reason lands in GpuSnapshot::unavailable. Used by `aisp doctor`, `aisp hw info` and the
// harness's telemetry.
//
//   std::string why;
//   auto nvml = aisp::Nvml::load(&why);          // nullptr + why when there is no usable NVML
//   if (nvml) {
//     for (int i = 0; i < nvml->device_count(); ++i) aisp::GpuSnapshot s = nvml->snapshot(i);
//     auto idx = nvml->index_of_pci_bus_id(cuda_pci_bus_id);   // CUDA ordinal -> NVML index
//     aisp::GpuTelemetry t = nvml->telemetry(*idx);            // cheap: clocks, power, temp,
//     throttle
//   }
//
// NVML indices follow PCI order and ignore CUDA_VISIBLE_DEVICES; map a CUDA device to its NVML
// index by PCI bus id or UUID, never by ordinal. NVML itself is thread-safe and the wrapper is
// immutable after load(), so one instance may be shared across threads.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/gpu_snapshot.hpp"

namespace aisp {

class Nvml {
 public:
  // The process-wide instance: loaded and initialized on first use, shared while anyone holds it.
  // nullptr when NVML is unusable, with the reason in *why_not (e.g. "NVML not loadable:
  // libnvidia-ml.so.1: cannot open shared object file: No such file or directory").
  static std::shared_ptr<Nvml> load(std::string* why_not);

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // 0 (with *why_not) when NVML cannot count its devices.
  int device_count(std::string* why_not = nullptr) const;

  // Everything NVML says about one GPU; fields it cannot read stay empty, with the reason.
  GpuSnapshot snapshot(int index) const;

  // The few values that move while kernels run (clocks, power, temperature, throttle reasons).
  // `unavailable`, when given, receives field -> reason for what could not be read.
  GpuTelemetry telemetry(int index,
                         std::map<std::string, std::string>* unavailable = nullptr) const;

  std::optional<int> index_of_pci_bus_id(std::string_view bus_id) const;  // any common spelling
  std::optional<int> index_of_uuid(std::string_view uuid) const;          // "GPU-xxxxxxxx-..."

  std::optional<std::string> driver_version(std::string* why_not = nullptr) const;
  std::optional<int> cuda_driver_version(std::string* why_not = nullptr) const;  // 12080 = 12.8

  // Optional entry points this libnvidia-ml.so.1 does not export (older drivers).
  const std::vector<std::string>& missing_symbols() const { return m_missing; }

  struct Api;  // the resolved entry points (nvml.cpp)

 private:
  Nvml(void* lib, std::unique_ptr<Api> api, std::vector<std::string> missing);

  void* m_lib = nullptr;
  std::unique_ptr<Api> m_api;
  std::vector<std::string> m_missing;
};

// Defined in device/doctor_gpu.cpp: every GPU NVML sees, the CUDA runtime and driver versions, and
// each GPU's NUMA node completed from /sys/bus/pci (under `root`) where NVML does not give it.
// Never throws; what could not be read is recorded in the inventory (nvml_error, cuda_error,
// unavailable).
GpuInventory read_gpu_inventory(const std::filesystem::path& root = "/");

}  // namespace aisp
