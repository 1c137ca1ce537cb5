// Pure GPU rules of `aisp doctor`: an NVML snapshot (plus the inventory and the NUMA facts) in, a
// Finding out. Thresholds and recommended values live here, and docs/doctor.md lists them. Host
// rules sit next to their readers in doctor_host.cpp; environment and tool rules in doctor_env.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/doctor/doctor.hpp"

namespace aisp::doctor {

namespace {

constexpr std::string_view k_sec_os = "Operating System and Driver Optimizations";
constexpr std::string_view k_sec_sched = "GPU Resource Management and Scheduling";
constexpr std::string_view k_sec_power = "Power and Thermal Management";
constexpr std::string_view k_sec_multi = "Multi-GPU Scaling and Interconnect Optimizations";
constexpr std::string_view k_sec_arch = "System Architecture and Hardware Planning";
constexpr std::string_view k_sec_prof = "Performance Profiling, Debugging, and Monitoring";

std::string why(const GpuSnapshot& g, const std::string& field) {
  const auto it = g.unavailable.find(field);
  return it != g.unavailable.end() ? it->second : "not reported by NVML";
}

// CUDA versions are encoded 1000 * major + 10 * minor (12080 = 12.8).
std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

bool idle(const GpuSnapshot& g) {
  return g.now.throttle_reasons && (*g.now.throttle_reasons & throttle::gpu_idle);
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// ---- inventory-level GPU rules ------------------------------------------------------------------

Finding gpu_base(std::string_view id, std::string subject, std::string_view section,
                 std::string_view source, std::string_view recommended) {
  Finding f;
  f.id = id;
  f.group = Group::gpu;
  f.subject = std::move(subject);
  f.section = section;
  f.source = source;
  f.recommended = recommended;
  return f;
}

Finding rule_nvml(const GpuInventory& inv) {
  Finding f = gpu_base("gpu.nvml", "NVML", k_sec_prof, "dlopen(libnvidia-ml.so.1), nvmlInit_v2",
                       "loadable, every symbol aisp uses present");
  if (inv.nvml_error) return conclude(f, Severity::na, *inv.nvml_error);
  std::string found = fmt::format("loaded, {} GPU(s)", inv.gpus.size());
  if (!inv.nvml_missing_symbols.empty()) {
    return conclude(
        f, Severity::info,
        found + "; symbols missing (older driver): " + join(inv.nvml_missing_symbols, ", "),
        "update the NVIDIA driver to read the missing fields");
  }
  return conclude(f, Severity::ok, found);
}

Finding rule_driver(const GpuInventory& inv) {
  Finding f = gpu_base("gpu.driver", "driver", k_sec_os, "nvmlSystemGetDriverVersion",
                       "a current production branch, the same on every node");
  if (!inv.driver_version) {
    return conclude(f, Severity::na,
                    inv.nvml_error ? *inv.nvml_error : "driver version not reported");
  }
  std::string found = *inv.driver_version;
  if (inv.nvml_cuda_driver_version) {
    found += fmt::format(" (supports CUDA {})", cuda_version_string(*inv.nvml_cuda_driver_version));
  }
  return conclude(f, Severity::ok, found);
}

Finding rule_cuda_compat(const GpuInventory& inv) {
  Finding f = gpu_base("gpu.cuda_compat", "CUDA", k_sec_os,
                       "cudaRuntimeGetVersion, cudaDriverGetVersion (NVML as fallback)",
                       "driver's CUDA version >= the runtime aisp was built with");
  if (!inv.cuda_runtime_version) {
    return conclude(f, Severity::na,
                    inv.cuda_error ? *inv.cuda_error : "CUDA runtime version unknown");
  }
  const int rt = *inv.cuda_runtime_version;
  int drv = inv.cuda_driver_version.value_or(0);
  if (drv == 0) drv = inv.nvml_cuda_driver_version.value_or(0);
  if (drv == 0) {
    return conclude(
        f, Severity::na,
        fmt::format("runtime {}; no CUDA driver installed (cudaDriverGetVersion returned 0)",
                    cuda_version_string(rt)));
  }
  const std::string found = fmt::format("runtime {}, driver supports {}", cuda_version_string(rt),
                                        cuda_version_string(drv));
  if (drv >= rt) return conclude(f, Severity::ok, found);
  if (drv / 1000 == rt / 1000) {
    // Minor-version compatibility: SASS built for the device runs, but PTX from the newer toolkit
    // cannot be JIT-compiled and newer runtime features fail with cudaErrorCallRequiresNewerDriver.
    return conclude(f, Severity::warn, found + " (minor-version compatibility only)",
                    "install a driver that supports CUDA " + cuda_version_string(rt));
  }
  return conclude(f, Severity::fail, found + " (cudaErrorInsufficientDriver)",
                  "install a driver that supports CUDA " + cuda_version_string(rt) +
                      ", or the cuda-compat forward-compatibility package");
}

// ---- per-GPU rules ------------------------------------------------------------------------------

Finding gpu_persistence(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.persistence_mode) return conclude(f, Severity::na, why(g, "persistence_mode"));
  if (*g.persistence_mode) return conclude(f, Severity::ok, "enabled");
  return conclude(f, Severity::warn, "disabled (driver re-initializes the GPU for each process)",
                  "sudo nvidia-smi -pm 1, or enable the nvidia-persistenced service");
}

Finding gpu_ecc_mode(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.ecc_enabled) return conclude(f, Severity::na, why(g, "ecc_mode"));
  const bool pending = g.ecc_pending.value_or(*g.ecc_enabled);
  if (*g.ecc_enabled && pending) return conclude(f, Severity::ok, "enabled");
  if (*g.ecc_enabled) {
    return conclude(f, Severity::warn, "enabled, disabled after the next reset",
                    "sudo nvidia-smi -i " + std::to_string(g.index) + " -e 1 to cancel");
  }
  if (pending) {
    return conclude(f, Severity::warn, "disabled, enabled after the next reset",
                    "reboot or reset the GPU (nvidia-smi -r) to apply");
  }
  return conclude(f, Severity::warn, "disabled",
                  "sudo nvidia-smi -i " + std::to_string(g.index) + " -e 1, then reboot");
}

Finding gpu_ecc_errors(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (g.ecc_enabled == false)
    return conclude(f, Severity::na, "ECC disabled: no error counters kept");
  if (!g.ecc_volatile_uncorrected && !g.ecc_aggregate_uncorrected) {
    return conclude(f, Severity::na, why(g, "ecc_errors"));
  }
  auto v = [](const std::optional<std::uint64_t>& x) {
    return x ? std::to_string(*x) : std::string("?");
  };
  const std::string found =
      fmt::format("volatile {} corrected / {} uncorrected; aggregate {} corrected / {} uncorrected",
                  v(g.ecc_volatile_corrected), v(g.ecc_volatile_uncorrected),
                  v(g.ecc_aggregate_corrected), v(g.ecc_aggregate_uncorrected));
  if (g.ecc_volatile_uncorrected.value_or(0) > 0) {
    return conclude(
        f, Severity::fail, found,
        "drain the GPU, check nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT and reset it; "
        "replace the board if errors recur");
  }
  if (g.ecc_aggregate_uncorrected.value_or(0) > 0) {
    return conclude(
        f, Severity::warn, found,
        "past uncorrectable errors: check nvidia-smi -q -d ROW_REMAPPER for pending remaps");
  }
  if (g.ecc_volatile_corrected.value_or(0) > 0 || g.ecc_aggregate_corrected.value_or(0) > 0) {
    return conclude(f, Severity::info, found,
                    "watch the corrected count; a fast rise precedes failures");
  }
  return conclude(f, Severity::ok, found);
}

Finding gpu_clocks(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.now.sm_clock_mhz || !g.sm_clock_max_mhz) {
    return conclude(f, Severity::na, why(g, !g.now.sm_clock_mhz ? "sm_clock" : "sm_clock_max"));
  }
  std::string found = fmt::format("SM {}/{} MHz", *g.now.sm_clock_mhz, *g.sm_clock_max_mhz);
  bool low = *g.now.sm_clock_mhz < 0.9 * *g.sm_clock_max_mhz;
  if (g.now.mem_clock_mhz && g.mem_clock_max_mhz) {
    found += fmt::format(", memory {}/{} MHz", *g.now.mem_clock_mhz, *g.mem_clock_max_mhz);
    low = low || *g.now.mem_clock_mhz < 0.9 * *g.mem_clock_max_mhz;
  }
  if (!low) return conclude(f, Severity::ok, found);
  if (idle(g)) {
    // An idle GPU parks its clocks; that says nothing about clocks under load.
    return conclude(f, Severity::info, found + " (GPU idle)");
  }
  if (!g.now.throttle_reasons) {
    return conclude(f, Severity::info, found + " (throttle reasons unknown; may be idle)");
  }
  // Heavy kernels (large GEMMs) hit the board's power limit and clock down: expected, not a fault.
  constexpr std::uint64_t k_expected = throttle::sw_power_cap | throttle::sync_boost;
  if ((*g.now.throttle_reasons & throttle::sw_power_cap) &&
      (*g.now.throttle_reasons & ~k_expected) == 0) {
    return conclude(f, Severity::info, found + " while busy, held by the power limit");
  }
  return conclude(
      f, Severity::warn, found + " while busy",
      "see gpu.throttle; for repeatable timings lock clocks: sudo nvidia-smi -lgc <max>");
}

Finding gpu_power_limit(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.power_limit_w || !g.power_default_limit_w) {
    return conclude(f, Severity::na,
                    why(g, !g.power_limit_w ? "power_limit" : "power_default_limit"));
  }
  const double lim = *g.power_limit_w;
  const double def = *g.power_default_limit_w;
  const std::string found = fmt::format("{:.0f} W (default {:.0f} W)", lim, def);
  if (lim < 0.99 * def) {
    return conclude(
        f, Severity::warn, found + ": lowered",
        fmt::format("sudo nvidia-smi -i {} -pl {:.0f} (a lowered cap lowers clocks under load)",
                    g.index, def));
  }
  if (lim > 1.01 * def) return conclude(f, Severity::info, found + ": raised above default");
  return conclude(f, Severity::ok, found);
}

Finding gpu_throttle(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.now.throttle_reasons) return conclude(f, Severity::na, why(g, "throttle_reasons"));
  const std::uint64_t m = *g.now.throttle_reasons;
  const auto names = throttle_reason_names(m);
  const std::string found = names.empty() ? "none" : join(names, ", ");
  if (m & (throttle::hw_slowdown | throttle::hw_thermal | throttle::hw_power_brake)) {
    return conclude(
        f, Severity::fail, found,
        "hardware is slowing the GPU (cooling, power supply or power brake): fix it before "
        "timing anything; nvidia-smi -q -d PERFORMANCE");
  }
  if (m & throttle::sw_thermal) {
    return conclude(f, Severity::warn, found,
                    "improve cooling/airflow; check nvidia-smi -q -d TEMPERATURE");
  }
  if (m & throttle::sw_power_cap) {
    // Under a heavy kernel the power limit is the usual governor of clocks; at rest it should not
    // be.
    if (m & throttle::gpu_idle) {
      return conclude(f, Severity::warn, found + ": power cap engaged at rest",
                      "the power limit is too low for this board (see gpu.power_limit)");
    }
    return conclude(f, Severity::info, found + ": clocks held by the power limit under load",
                    "expected for heavy kernels; check gpu.power_limit is the default");
  }
  if (m & throttle::applications_clocks) {
    return conclude(f, Severity::info, found,
                    "clocks limited by application/locked clocks (nvidia-smi -ac/-lgc); reset with "
                    "nvidia-smi -rgc if not intended");
  }
  return conclude(f, Severity::ok, found);
}

Finding gpu_temperature(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.now.temperature_c) return conclude(f, Severity::na, why(g, "temperature"));
  const std::string found = fmt::format("{} C", *g.now.temperature_c);
  if (*g.now.temperature_c >= 85) {
    return conclude(f, Severity::warn, found, "near the thermal limit: improve cooling or airflow");
  }
  return conclude(f, Severity::ok, found);
}

Finding gpu_mig(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.mig_enabled) {
    if (is_not_supported(g, "mig")) return conclude(f, Severity::ok, "not supported (whole GPU)");
    return conclude(f, Severity::na, why(g, "mig"));
  }
  const bool pending = g.mig_pending.value_or(*g.mig_enabled);
  if (pending != *g.mig_enabled) {
    return conclude(
        f, Severity::warn,
        fmt::format("{}, {} after the next reset", *g.mig_enabled ? "enabled" : "disabled",
                    pending ? "enabled" : "disabled"),
        "reset the GPU (nvidia-smi -i " + std::to_string(g.index) + " -r) to apply");
  }
  if (*g.mig_enabled) {
    return conclude(
        f, Severity::warn,
        "enabled: a process sees one slice, not the whole GPU; results are not comparable "
        "with whole-GPU expectations",
        "sudo nvidia-smi -i " + std::to_string(g.index) + " -mig 0 (GPU must be idle)");
  }
  return conclude(f, Severity::ok, "disabled");
}

Finding gpu_pcie_gen(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.pcie_gen || !g.pcie_gen_max) {
    return conclude(f, Severity::na, why(g, !g.pcie_gen ? "pcie_gen" : "pcie_gen_max"));
  }
  std::string found = fmt::format("Gen{} (max Gen{}", *g.pcie_gen, *g.pcie_gen_max);
  if (g.pcie_gen_gpu_max) found += fmt::format(", GPU supports Gen{}", *g.pcie_gen_gpu_max);
  found += ")";
  if (g.pcie_gen_gpu_max && *g.pcie_gen_max < *g.pcie_gen_gpu_max) {
    return conclude(
        f, Severity::warn, found + ": the slot limits the link",
        fmt::format("move the GPU to a Gen{} slot or raise the slot's speed in the BIOS",
                    *g.pcie_gen_gpu_max));
  }
  if (*g.pcie_gen < *g.pcie_gen_max) {
    // Links train down to Gen1 when idle to save power and back up under load.
    if (idle(g))
      return conclude(f, Severity::info, found + ": idle, link trained down to save power");
    return conclude(f, Severity::warn, found + ": below max while busy",
                    "check the riser/slot and BIOS PCIe settings; reseat the GPU");
  }
  return conclude(f, Severity::ok, found);
}

Finding gpu_pcie_width(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts&) {
  if (!g.pcie_width || !g.pcie_width_max) {
    return conclude(f, Severity::na, why(g, !g.pcie_width ? "pcie_width" : "pcie_width_max"));
  }
  const std::string found = fmt::format("x{} (max x{})", *g.pcie_width, *g.pcie_width_max);
  if (*g.pcie_width < *g.pcie_width_max) {
    return conclude(f, Severity::warn, found + ": degraded link, host<->device bandwidth cut",
                    "reseat the GPU or check the riser/slot (lspci -vv, LnkSta)");
  }
  return conclude(f, Severity::ok, found);
}

Finding gpu_nvlink(Finding f, const GpuSnapshot& g, const GpuInventory& inv, const NumaFacts&) {
  if (!g.nvlink_active) {
    if (is_not_supported(g, "nvlink")) return conclude(f, Severity::info, "no NVLink (PCIe only)");
    return conclude(f, Severity::na, why(g, "nvlink"));
  }
  const auto& links = *g.nvlink_active;
  if (links.empty()) return conclude(f, Severity::info, "no NVLink (PCIe only)");
  const auto active = std::count(links.begin(), links.end(), true);
  const std::string found = fmt::format("{}/{} links active", active, links.size());
  if (active == static_cast<long>(links.size())) return conclude(f, Severity::ok, found);
  if (active == 0) {
    // A lone GPU with idle links (a PCIe card without a bridge, a VM given one GPU) has nothing to
    // link to; with several GPUs, traffic between them falls back to PCIe.
    return conclude(
        f, inv.gpus.size() > 1 ? Severity::warn : Severity::info, found,
        "NVSwitch systems: start nvidia-fabricmanager; bridged cards: check the bridge");
  }
  return conclude(
      f, Severity::warn, found + ": degraded",
      "nvidia-smi nvlink -s -i " + std::to_string(g.index) + "; reset the GPU or report it");
}

bool subset(const std::vector<int>& a, const std::vector<int>& b) {
  return std::all_of(a.begin(), a.end(),
                     [&](int x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

Finding gpu_numa(Finding f, const GpuSnapshot& g, const GpuInventory&, const NumaFacts& numa) {
  if (numa.nodes.size() <= 1) {
    return conclude(f, Severity::ok,
                    numa.nodes.empty() ? "no NUMA nodes exposed: nothing to align"
                                       : "single NUMA node: nothing to align");
  }
  if (!g.numa_node || *g.numa_node < 0) {
    return conclude(f, Severity::na,
                    g.numa_node ? "firmware reports no NUMA node for the GPU (numa_node = -1)"
                                : why(g, "numa_node"));
  }
  const int node = *g.numa_node;
  std::vector<int> local = g.cpu_affinity;
  if (const auto it = numa.node_cpus.find(node); local.empty() && it != numa.node_cpus.end()) {
    local = it->second;
  }
  const std::string fix =
      fmt::format("run under numactl --cpunodebind={0} --membind={0} (or taskset -c {1})", node,
                  format_cpulist(local));
  std::string found = fmt::format("GPU on node {} (CPUs {}); process CPUs {}", node,
                                  format_cpulist(local), format_cpulist(numa.process_cpus));
  if (local.empty() || numa.process_cpus.empty()) {
    return conclude(f, Severity::na, found + ": CPU sets unknown");
  }
  const bool mem_ok = numa.process_mems.empty() ||
                      std::find(numa.process_mems.begin(), numa.process_mems.end(), node) !=
                          numa.process_mems.end();
  if (subset(numa.process_cpus, local) && mem_ok)
    return conclude(f, Severity::ok, found + ": local");
  if (numa.process_cpus == numa.online_cpus) {
    return conclude(f, Severity::warn, found + ": not bound, may run on the far socket", fix);
  }
  if (!mem_ok) {
    return conclude(f, Severity::warn,
                    found + fmt::format(", memory nodes {}: host memory is remote to the GPU",
                                        format_cpulist(numa.process_mems)),
                    fix);
  }
  return conclude(f, Severity::warn, found + ": bound to CPUs that are not local to the GPU", fix);
}

constexpr std::array<GpuRule, 12> k_gpu_rules{{
    {"gpu.persistence", k_sec_os, "nvmlDeviceGetPersistenceMode", "enabled", gpu_persistence},
    {"gpu.ecc_mode", k_sec_sched, "nvmlDeviceGetEccMode", "enabled", gpu_ecc_mode},
    {"gpu.ecc_errors", k_sec_prof, "nvmlDeviceGetTotalEccErrors", "0 uncorrected", gpu_ecc_errors},
    {"gpu.clocks", k_sec_power, "nvmlDeviceGetClockInfo, nvmlDeviceGetMaxClockInfo",
     ">= 90% of max under load", gpu_clocks},
    {"gpu.power_limit", k_sec_power,
     "nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetPowerManagementDefaultLimit",
     "the default limit", gpu_power_limit},
    {"gpu.throttle", k_sec_power, "nvmlDeviceGetCurrentClocksEventReasons",
     "none (or idle / sync boost)", gpu_throttle},
    {"gpu.temperature", k_sec_power, "nvmlDeviceGetTemperature", "< 85 C", gpu_temperature},
    {"gpu.mig", k_sec_sched, "nvmlDeviceGetMigMode", "disabled for benchmarking", gpu_mig},
    {"gpu.pcie_gen", k_sec_arch,
     "nvmlDeviceGetCurrPcieLinkGeneration, nvmlDeviceGetMaxPcieLinkGeneration",
     "current = max under load; slot max = GPU max", gpu_pcie_gen},
    {"gpu.pcie_width", k_sec_arch, "nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth",
     "current = max", gpu_pcie_width},
    {"gpu.nvlink", k_sec_multi, "nvmlDeviceGetNvLinkState", "every link active", gpu_nvlink},
    {"gpu.numa_affinity", k_sec_os,
     "nvmlDeviceGetMemoryAffinity or /sys/bus/pci/devices/<id>/numa_node, /proc/self/status",
     "process CPUs and memory on the GPU's NUMA node", gpu_numa},
}};

std::string gpu_subject(const GpuSnapshot& g) {
  return g.name ? fmt::format("GPU {} ({})", g.index, *g.name) : fmt::format("GPU {}", g.index);
}

}  // namespace

// ---- public: GPU checks -------------------------------------------------------------------------

std::span<const GpuRule> gpu_rules() { return k_gpu_rules; }

std::vector<Finding> run_gpu_checks(const GpuInventory& inv, const NumaFacts& numa) {
  std::vector<Finding> out{rule_nvml(inv), rule_driver(inv), rule_cuda_compat(inv)};
  if (inv.gpus.empty()) {
    // The full reason is in gpu.nvml; repeating it on every row would drown the report.
    const std::string reason = inv.nvml_error ? "no GPU visible: NVML unavailable (see gpu.nvml)"
                                              : "no GPU visible: NVML reports 0 GPUs";
    for (const auto& r : k_gpu_rules) {
      out.push_back(conclude(gpu_base(r.id, "GPU", r.section, r.source, r.recommended),
                             Severity::na, reason));
    }
    return out;
  }
  for (const auto& g : inv.gpus) {
    for (const auto& r : k_gpu_rules) {
      Finding base = gpu_base(r.id, gpu_subject(g), r.section, r.source, r.recommended);
      try {
        out.push_back(r.run(base, g, inv, numa));
      } catch (const std::exception& e) {
        out.push_back(conclude(base, Severity::na, std::string("rule failed: ") + e.what()));
      }
    }
  }
  return out;
}

}  // namespace aisp::doctor
