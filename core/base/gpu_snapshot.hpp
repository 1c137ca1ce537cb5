// What NVML told us about one GPU, as plain C++ so that core/ rules can take it as input and tests
// can build one by hand. Filled by device/nvml.cpp; every field is optional because every NVML
// query can be unsupported, forbidden or missing from an old driver. When a field stays empty,
// `unavailable` holds why under the field's name, so a report can say "n/a: nvmlDeviceGetEccMode:
// Not Supported" instead of a bare "n/a".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aisp {

// Clock-event ("throttle") reason bits, as NVML defines them (nvmlClocksEventReason*). Stable
// across driver branches; newer drivers only add bits, which we print as hex.
namespace throttle {
inline constexpr std::uint64_t gpu_idle = 0x1;
inline constexpr std::uint64_t applications_clocks = 0x2;  // user-set application/locked clocks
inline constexpr std::uint64_t sw_power_cap = 0x4;
inline constexpr std::uint64_t hw_slowdown = 0x8;
inline constexpr std::uint64_t sync_boost = 0x10;
inline constexpr std::uint64_t sw_thermal = 0x20;
inline constexpr std::uint64_t hw_thermal = 0x40;
inline constexpr std::uint64_t hw_power_brake = 0x80;
inline constexpr std::uint64_t display_clocks = 0x100;
}  // namespace throttle

// Names of the set bits, in bit order; unknown bits come out as "0x...".
inline std::vector<std::string> throttle_reason_names(std::uint64_t mask) {
  static constexpr std::pair<std::uint64_t, std::string_view> k_names[] = {
      {throttle::gpu_idle, "gpu_idle"},
      {throttle::applications_clocks, "applications_clocks"},
      {throttle::sw_power_cap, "sw_power_cap"},
      {throttle::hw_slowdown, "hw_slowdown"},
      {throttle::sync_boost, "sync_boost"},
      {throttle::sw_thermal, "sw_thermal_slowdown"},
      {throttle::hw_thermal, "hw_thermal_slowdown"},
      {throttle::hw_power_brake, "hw_power_brake_slowdown"},
      {throttle::display_clocks, "display_clocks"},
  };
  std::vector<std::string> out;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : k_names) {
    known |= bit;
    if (mask & bit) out.emplace_back(name);
  }
  for (int b = 0; b < 64; ++b) {
    const std::uint64_t bit = std::uint64_t{1} << b;
    if ((mask & bit) && !(known & bit)) {
      static constexpr char k_hex[] = "0123456789abcdef";
      std::string hex;
      for (std::uint64_t v = bit; v != 0; v >>= 4) hex.insert(hex.begin(), k_hex[v & 0xf]);
      out.push_back("0x" + hex);
    }
  }
  return out;
}

// "00000000:18:00.0" (NVML), "0000:18:00.0" (CUDA, sysfs) -> "0000:18:00.0", lower case: the form
// /sys/bus/pci/devices uses, so ids from NVML, CUDA and sysfs compare equal. Unparseable input is
// returned lower-cased.
inline std::string normalize_pci_bus_id(std::string_view id) {
  std::string s;
  for (char c : id) s.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
  const auto first = s.find(':');
  if (first == std::string::npos || s.find(':', first + 1) == std::string::npos) return s;
  std::string domain = s.substr(0, first);
  while (domain.size() > 4 && domain.front() == '0') domain.erase(domain.begin());
  while (domain.size() < 4) domain.insert(domain.begin(), '0');
  return domain + s.substr(first);
}

// The values that change while a kernel runs: the harness reads these before and after each
// variant.
struct GpuTelemetry {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> mem_clock_mhz;
  std::optional<double> power_draw_w;
  std::optional<unsigned> temperature_c;
  std::optional<std::uint64_t> throttle_reasons;   // nvmlClocksEventReason* bitmask
  std::vector<std::string> throttle_reason_names;  // decoded throttle_reasons
};

struct GpuSnapshot {
  int index = 0;  // NVML index (PCI order; not the CUDA ordinal, which CUDA_VISIBLE_DEVICES remaps)
  std::optional<std::string> name;
  std::optional<std::string> uuid;
  std::optional<std::string> pci_bus_id;  // normalized: "0000:18:00.0"

  GpuTelemetry now;
  std::optional<unsigned> sm_clock_max_mhz;
  std::optional<unsigned> mem_clock_max_mhz;

  std::optional<double> power_limit_w;          // enforced limit, what caps the clocks now
  std::optional<double> power_default_limit_w;  // the board's default

  std::optional<bool> ecc_enabled;
  std::optional<bool> ecc_pending;  // takes effect at the next reboot/reset
  std::optional<std::uint64_t> ecc_volatile_corrected;
  std::optional<std::uint64_t> ecc_volatile_uncorrected;
  std::optional<std::uint64_t> ecc_aggregate_corrected;
  std::optional<std::uint64_t> ecc_aggregate_uncorrected;

  std::optional<bool> persistence_mode;
  std::optional<bool>
      mig_enabled;  // empty with unavailable["mig"] = "...Not Supported" on non-MIG GPUs
  std::optional<bool> mig_pending;

  std::optional<unsigned> pcie_gen;      // current link generation (drops at idle to save power)
  std::optional<unsigned> pcie_gen_max;  // best this GPU can train to in this slot
  std::optional<unsigned> pcie_gen_gpu_max;  // best this GPU supports in any slot
  std::optional<unsigned> pcie_width;
  std::optional<unsigned> pcie_width_max;

  // One entry per NVLink the GPU has (true = active). Empty vector: the GPU has no NVLink.
  std::optional<std::vector<bool>> nvlink_active;

  std::optional<int> numa_node;   // host NUMA node nearest the GPU
  std::vector<int> cpu_affinity;  // CPUs NVML considers local to the GPU (empty: unknown)

  // field name -> why it could not be read. When NVML answers NOT_SUPPORTED the reason starts with
  // k_not_supported ("not supported by this GPU (nvmlDeviceGetMigMode)"): for MIG or NVLink that is
  // an answer (the GPU has none), not a failure to read.
  std::map<std::string, std::string> unavailable;
};

inline constexpr std::string_view k_not_supported = "not supported by this GPU";

inline bool is_not_supported(const GpuSnapshot& g, const std::string& field) {
  const auto it = g.unavailable.find(field);
  return it != g.unavailable.end() && it->second.starts_with(k_not_supported);
}

// Everything the GPU checks need beyond one snapshot: what was loadable and the versions.
struct GpuInventory {
  std::optional<std::string> nvml_error;  // set when NVML could not be loaded or initialized
  std::vector<std::string> nvml_missing_symbols;
  std::optional<std::string> driver_version;    // "570.133.20"
  std::optional<int> nvml_cuda_driver_version;  // 12080 = CUDA 12.8, from NVML
  std::optional<int> cuda_driver_version;       // from cudaDriverGetVersion; 0 = no driver
  std::optional<int> cuda_runtime_version;  // from cudaRuntimeGetVersion: what aisp was built with
  std::optional<std::string> cuda_error;    // why the two above are empty
  std::vector<GpuSnapshot> gpus;
};

}  // namespace aisp
