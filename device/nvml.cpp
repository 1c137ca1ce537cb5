// NVML through dlopen: our own minimal declarations (nvml.h may not be installed, and a build must
// not depend on it), each entry point resolved separately, every call's status checked.
#include "device/nvml.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <mutex>

namespace aisp {

namespace {

// ---- the subset of nvml.h we use (values from the NVML API reference; stable since r4xx) --------
using NvmlReturn = int;  // nvmlReturn_t; C enums are int-sized on every ABI the driver ships for
using NvmlDevice = struct NvmlDeviceOpaque*;

constexpr NvmlReturn k_success = 0;
constexpr NvmlReturn k_err_invalid_argument = 2;
constexpr NvmlReturn k_err_not_supported = 3;

constexpr int k_clock_sm = 1;       // NVML_CLOCK_SM
constexpr int k_clock_mem = 2;      // NVML_CLOCK_MEM
constexpr int k_temp_gpu = 0;       // NVML_TEMPERATURE_GPU
constexpr int k_ecc_corrected = 0;  // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int k_ecc_uncorrected = 1;
constexpr int k_ecc_volatile = 0;       // NVML_VOLATILE_ECC
constexpr int k_ecc_aggregate = 1;      // NVML_AGGREGATE_ECC
constexpr int k_affinity_node = 0;      // NVML_AFFINITY_SCOPE_NODE
constexpr unsigned k_max_nvlinks = 32;  // NVML_NVLINK_MAX_LINKS is 18 today; the loop stops earlier

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it: legacy id @0, domain @16, ..., busId @36.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
static_assert(offsetof(NvmlPciInfo, bus_id) == 36, "nvmlPciInfo_t layout");

template <typename Fn>
void resolve(void* lib, Fn*& out, std::initializer_list<const char*> names,
             std::vector<std::string>* missing) {
  for (const char* n : names) {
    if (void* p = dlsym(lib, n)) {
      out = reinterpret_cast<Fn*>(p);
      return;
    }
  }
  out = nullptr;
  if (missing) missing->emplace_back(*names.begin());
}

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*device_count)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  NvmlReturn (*cuda_driver_version)(int*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*pci_info)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*enforced_power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*default_power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*ecc_mode)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*ecc_errors)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  NvmlReturn (*persistence_mode)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*pcie_gen)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_gen_max)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_gen_gpu_max)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_width_max)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*memory_affinity)(NvmlDevice, unsigned, unsigned long*, int) = nullptr;
  NvmlReturn (*cpu_affinity)(NvmlDevice, unsigned, unsigned long*) = nullptr;

  std::string describe(const char* symbol, NvmlReturn r) const {
    if (r == k_err_not_supported) return fmt::format("{} ({})", aisp::k_not_supported, symbol);
    const char* text = error_string ? error_string(r) : nullptr;
    return fmt::format("{}: {}", symbol, text ? text : fmt::format("NVML error {}", r));
  }

  // Calls `fn` if it was resolved; on failure records why under `field` and returns false.
  template <typename Fn, typename... Args>
  bool call(std::map<std::string, std::string>* why, const char* field, const char* symbol, Fn* fn,
            Args... args) const {
    const auto note = [&](std::string reason) {
      // First reason wins: a field read by several calls keeps the one that explains it best.
      if (why) why->emplace(field, std::move(reason));
    };
    if (!fn) {
      note(fmt::format("{} not exported by this libnvidia-ml.so.1 (driver too old)", symbol));
      return false;
    }
    const NvmlReturn r = fn(args...);
    if (r == k_success) return true;
    note(describe(symbol, r));
    return false;
  }
};

namespace {

std::vector<int> bits_to_list(const unsigned long* words, unsigned n_words) {
  std::vector<int> out;
  constexpr int k_bits = 8 * sizeof(unsigned long);
  for (unsigned w = 0; w < n_words; ++w) {
    for (int b = 0; b < k_bits; ++b) {
      if (words[w] & (1UL << b)) out.push_back(static_cast<int>(w) * k_bits + b);
    }
  }
  return out;
}

std::string c_string(const char* buf, std::size_t cap) {
  return std::string(buf, strnlen(buf, cap));
}

}  // namespace

std::shared_ptr<Nvml> Nvml::load(std::string* why_not) {
  // One initialized NVML per process: nvmlInit costs tens of milliseconds and the harness asks
  // often.
  static std::mutex mutex;
  static std::weak_ptr<Nvml> cached;
  std::lock_guard lock(mutex);
  if (auto live = cached.lock()) return live;

  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    if (why_not) *why_not = std::string("NVML not loadable: ") + (err ? err : "dlopen failed");
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  std::vector<std::string> required_missing, missing;
  resolve(lib, api->init, {"nvmlInit_v2", "nvmlInit"}, &required_missing);
  resolve(lib, api->shutdown, {"nvmlShutdown"}, &required_missing);
  resolve(lib, api->device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"},
          &required_missing);
  resolve(lib, api->handle_by_index,
          {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, &required_missing);
  if (!required_missing.empty()) {
    if (why_not) {
      *why_not = "NVML unusable: libnvidia-ml.so.1 lacks ";
      for (std::size_t i = 0; i < required_missing.size(); ++i) {
        *why_not += (i ? ", " : "") + required_missing[i];
      }
    }
    dlclose(lib);
    return nullptr;
  }
  resolve(lib, api->error_string, {"nvmlErrorString"}, &missing);
  resolve(lib, api->driver_version, {"nvmlSystemGetDriverVersion"}, &missing);
  resolve(lib, api->cuda_driver_version,
          {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"}, &missing);
  resolve(lib, api->name, {"nvmlDeviceGetName"}, &missing);
  resolve(lib, api->uuid, {"nvmlDeviceGetUUID"}, &missing);
  resolve(lib, api->pci_info, {"nvmlDeviceGetPciInfo_v3"}, &missing);
  resolve(lib, api->clock, {"nvmlDeviceGetClockInfo"}, &missing);
  resolve(lib, api->max_clock, {"nvmlDeviceGetMaxClockInfo"}, &missing);
  resolve(lib, api->power_usage, {"nvmlDeviceGetPowerUsage"}, &missing);
  resolve(lib, api->enforced_power_limit,
          {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"}, &missing);
  resolve(lib, api->default_power_limit, {"nvmlDeviceGetPowerManagementDefaultLimit"}, &missing);
  resolve(lib, api->temperature, {"nvmlDeviceGetTemperature"}, &missing);
  // Renamed from "throttle" to "clocks event" reasons in r535; same signature and bits.
  resolve(lib, api->event_reasons,
          {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
          &missing);
  resolve(lib, api->ecc_mode, {"nvmlDeviceGetEccMode"}, &missing);
  resolve(lib, api->ecc_errors, {"nvmlDeviceGetTotalEccErrors"}, &missing);
  resolve(lib, api->persistence_mode, {"nvmlDeviceGetPersistenceMode"}, &missing);
  resolve(lib, api->mig_mode, {"nvmlDeviceGetMigMode"}, &missing);
  resolve(lib, api->pcie_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"}, &missing);
  resolve(lib, api->pcie_gen_max, {"nvmlDeviceGetMaxPcieLinkGeneration"}, &missing);
  resolve(lib, api->pcie_gen_gpu_max, {"nvmlDeviceGetGpuMaxPcieLinkGeneration"}, &missing);
  resolve(lib, api->pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"}, &missing);
  resolve(lib, api->pcie_width_max, {"nvmlDeviceGetMaxPcieLinkWidth"}, &missing);
  resolve(lib, api->nvlink_state, {"nvmlDeviceGetNvLinkState"}, &missing);
  resolve(lib, api->memory_affinity, {"nvmlDeviceGetMemoryAffinity"}, &missing);
  resolve(lib, api->cpu_affinity, {"nvmlDeviceGetCpuAffinity"}, &missing);

  const NvmlReturn r = api->init();
  if (r != k_success) {
    if (why_not) *why_not = "NVML init failed: " + api->describe("nvmlInit_v2", r);
    dlclose(lib);
    return nullptr;
  }
  std::shared_ptr<Nvml> nvml(new Nvml(lib, std::move(api), std::move(missing)));
  cached = nvml;
  return nvml;
}

Nvml::Nvml(void* lib, std::unique_ptr<Api> api, std::vector<std::string> missing)
    : m_lib(lib), m_api(std::move(api)), m_missing(std::move(missing)) {}

Nvml::~Nvml() {
  if (m_api && m_api->shutdown) m_api->shutdown();
  if (m_lib) dlclose(m_lib);
}

int Nvml::device_count(std::string* why_not) const {
  unsigned n = 0;
  std::map<std::string, std::string> why;
  if (!m_api->call(&why, "count", "nvmlDeviceGetCount_v2", m_api->device_count, &n)) {
    if (why_not) *why_not = why["count"];
    return 0;
  }
  return static_cast<int>(n);
}

std::optional<std::string> Nvml::driver_version(std::string* why_not) const {
  char buf[96] = {};
  std::map<std::string, std::string> why;
  if (!m_api->call(&why, "v", "nvmlSystemGetDriverVersion", m_api->driver_version, buf,
                   static_cast<unsigned>(sizeof buf))) {
    if (why_not) *why_not = why["v"];
    return std::nullopt;
  }
  return c_string(buf, sizeof buf);
}

std::optional<int> Nvml::cuda_driver_version(std::string* why_not) const {
  int v = 0;
  std::map<std::string, std::string> why;
  if (!m_api->call(&why, "v", "nvmlSystemGetCudaDriverVersion_v2", m_api->cuda_driver_version,
                   &v)) {
    if (why_not) *why_not = why["v"];
    return std::nullopt;
  }
  return v;
}

GpuTelemetry Nvml::telemetry(int index, std::map<std::string, std::string>* why) const {
  GpuTelemetry t;
  NvmlDevice dev = nullptr;
  if (!m_api->call(why, "device", "nvmlDeviceGetHandleByIndex_v2", m_api->handle_by_index,
                   static_cast<unsigned>(index), &dev)) {
    return t;
  }
  unsigned u = 0;
  if (m_api->call(why, "sm_clock", "nvmlDeviceGetClockInfo", m_api->clock, dev, k_clock_sm, &u)) {
    t.sm_clock_mhz = u;
  }
  if (m_api->call(why, "mem_clock", "nvmlDeviceGetClockInfo", m_api->clock, dev, k_clock_mem, &u)) {
    t.mem_clock_mhz = u;
  }
  if (m_api->call(why, "power_draw", "nvmlDeviceGetPowerUsage", m_api->power_usage, dev, &u)) {
    t.power_draw_w = u / 1000.0;  // NVML reports milliwatts
  }
  if (m_api->call(why, "temperature", "nvmlDeviceGetTemperature", m_api->temperature, dev,
                  k_temp_gpu, &u)) {
    t.temperature_c = u;
  }
  unsigned long long mask = 0;
  if (m_api->call(why, "throttle_reasons", "nvmlDeviceGetCurrentClocksEventReasons",
                  m_api->event_reasons, dev, &mask)) {
    t.throttle_reasons = mask;
    t.throttle_reason_names = throttle_reason_names(mask);
  }
  return t;
}

GpuSnapshot Nvml::snapshot(int index) const {
  GpuSnapshot s;
  s.index = index;
  auto* why = &s.unavailable;
  s.now = telemetry(index, why);
  NvmlDevice dev = nullptr;
  if (!m_api->call(why, "device", "nvmlDeviceGetHandleByIndex_v2", m_api->handle_by_index,
                   static_cast<unsigned>(index), &dev)) {
    return s;
  }
  const Api& a = *m_api;
  char buf[256] = {};
  if (a.call(why, "name", "nvmlDeviceGetName", a.name, dev, buf, unsigned{sizeof buf})) {
    s.name = c_string(buf, sizeof buf);
  }
  if (a.call(why, "uuid", "nvmlDeviceGetUUID", a.uuid, dev, buf, unsigned{sizeof buf})) {
    s.uuid = c_string(buf, sizeof buf);
  }
  // Padding behind the struct: should a future driver grow nvmlPciInfo_t, it writes into the pad.
  struct {
    NvmlPciInfo info;
    char pad[256];
  } pci{};
  if (a.call(why, "pci_bus_id", "nvmlDeviceGetPciInfo_v3", a.pci_info, dev, &pci.info)) {
    s.pci_bus_id = normalize_pci_bus_id(c_string(pci.info.bus_id, sizeof pci.info.bus_id));
  }
  unsigned u = 0, v = 0;
  if (a.call(why, "sm_clock_max", "nvmlDeviceGetMaxClockInfo", a.max_clock, dev, k_clock_sm, &u)) {
    s.sm_clock_max_mhz = u;
  }
  if (a.call(why, "mem_clock_max", "nvmlDeviceGetMaxClockInfo", a.max_clock, dev, k_clock_mem,
             &u)) {
    s.mem_clock_max_mhz = u;
  }
  if (a.call(why, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", a.enforced_power_limit, dev,
             &u)) {
    s.power_limit_w = u / 1000.0;
  }
  if (a.call(why, "power_default_limit", "nvmlDeviceGetPowerManagementDefaultLimit",
             a.default_power_limit, dev, &u)) {
    s.power_default_limit_w = u / 1000.0;
  }
  int cur = 0, pend = 0;
  if (a.call(why, "ecc_mode", "nvmlDeviceGetEccMode", a.ecc_mode, dev, &cur, &pend)) {
    s.ecc_enabled = cur != 0;
    s.ecc_pending = pend != 0;
  }
  if (!s.ecc_enabled) {
    s.unavailable.emplace("ecc_errors", "ECC mode unknown: " + s.unavailable["ecc_mode"]);
  } else if (*s.ecc_enabled) {
    unsigned long long n = 0;
    const auto ecc = [&](int type, int counter, std::optional<std::uint64_t>& out) {
      if (a.call(why, "ecc_errors", "nvmlDeviceGetTotalEccErrors", a.ecc_errors, dev, type, counter,
                 &n)) {
        out = n;
      }
    };
    ecc(k_ecc_corrected, k_ecc_volatile, s.ecc_volatile_corrected);
    ecc(k_ecc_uncorrected, k_ecc_volatile, s.ecc_volatile_uncorrected);
    ecc(k_ecc_corrected, k_ecc_aggregate, s.ecc_aggregate_corrected);
    ecc(k_ecc_uncorrected, k_ecc_aggregate, s.ecc_aggregate_uncorrected);
  }
  int state = 0;
  if (a.call(why, "persistence_mode", "nvmlDeviceGetPersistenceMode", a.persistence_mode, dev,
             &state)) {
    s.persistence_mode = state != 0;
  }
  if (a.call(why, "mig", "nvmlDeviceGetMigMode", a.mig_mode, dev, &u, &v)) {
    s.mig_enabled = u != 0;
    s.mig_pending = v != 0;
  }
  if (a.call(why, "pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", a.pcie_gen, dev, &u)) {
    s.pcie_gen = u;
  }
  if (a.call(why, "pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", a.pcie_gen_max, dev, &u)) {
    s.pcie_gen_max = u;
  }
  if (a.call(why, "pcie_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration", a.pcie_gen_gpu_max,
             dev, &u)) {
    s.pcie_gen_gpu_max = u;
  }
  if (a.call(why, "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", a.pcie_width, dev, &u)) {
    s.pcie_width = u;
  }
  if (a.call(why, "pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", a.pcie_width_max, dev, &u)) {
    s.pcie_width_max = u;
  }
  // NVLink: ask link by link until the GPU says the link does not exist. NOT_SUPPORTED on link 0
  // means no NVLink at all, which is an answer, not a failure.
  if (!a.nvlink_state) {
    a.call(why, "nvlink", "nvmlDeviceGetNvLinkState", a.nvlink_state, dev, 0u, &state);
  } else {
    std::vector<bool> links;
    for (unsigned link = 0; link < k_max_nvlinks; ++link) {
      const NvmlReturn r = a.nvlink_state(dev, link, &state);
      if (r == k_success) {
        links.push_back(state != 0);
        continue;
      }
      if (r != k_err_invalid_argument && r != k_err_not_supported && links.empty()) {
        why->emplace("nvlink", a.describe("nvmlDeviceGetNvLinkState", r));
      }
      break;
    }
    if (!why->contains("nvlink")) s.nvlink_active = std::move(links);
  }
  unsigned long words[64] = {};  // 4096 CPUs or NUMA nodes
  if (a.call(why, "numa_node", "nvmlDeviceGetMemoryAffinity", a.memory_affinity, dev, 64u, words,
             k_affinity_node)) {
    const auto nodes = bits_to_list(words, 64);
    if (nodes.size() == 1) {
      s.numa_node = nodes.front();
    } else {
      why->emplace("numa_node",
                   fmt::format("nvmlDeviceGetMemoryAffinity names {} nodes", nodes.size()));
    }
  }
  std::fill(std::begin(words), std::end(words), 0UL);
  if (a.call(why, "cpu_affinity", "nvmlDeviceGetCpuAffinity", a.cpu_affinity, dev, 64u, words)) {
    s.cpu_affinity = bits_to_list(words, 64);
  }
  return s;
}

std::optional<int> Nvml::index_of_pci_bus_id(std::string_view bus_id) const {
  const std::string want = normalize_pci_bus_id(bus_id);
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    NvmlDevice dev = nullptr;
    struct {
      NvmlPciInfo info;
      char pad[256];
    } pci{};
    if (m_api->call(nullptr, "", "", m_api->handle_by_index, static_cast<unsigned>(i), &dev) &&
        m_api->call(nullptr, "", "", m_api->pci_info, dev, &pci.info) &&
        normalize_pci_bus_id(c_string(pci.info.bus_id, sizeof pci.info.bus_id)) == want) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<int> Nvml::index_of_uuid(std::string_view uuid) const {
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    NvmlDevice dev = nullptr;
    char buf[256] = {};
    if (m_api->call(nullptr, "", "", m_api->handle_by_index, static_cast<unsigned>(i), &dev) &&
        m_api->call(nullptr, "", "", m_api->uuid, dev, buf, unsigned{sizeof buf}) &&
        c_string(buf, sizeof buf) == uuid) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace aisp
