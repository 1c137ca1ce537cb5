// `aisp hw info` (device facts and NVML telemetry for every visible GPU) and `aisp hw peaks` (this
// machine's measured ceilings, docs/ceilings.md).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/base/gpu_snapshot.hpp"
#include "core/base/hardware_key.hpp"
#include "core/base/instrumentation.hpp"
#include "core/measure/verdict.hpp"
#include "device/device_info.hpp"
#include "device/nvml.hpp"
#include "device/probes.hpp"

namespace aisp::cli {

namespace {

using ojson = nlohmann::ordered_json;

template <class T>
ojson opt(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

// NVML's view of one GPU (fields it cannot read are null, with the reason under "unavailable").
ojson nvml_json(const GpuSnapshot& g) {
  ojson unavailable = ojson::object();
  for (const auto& [k, why] : g.unavailable) unavailable[k] = why;
  ojson nvlink = nullptr;
  if (g.nvlink_active) {
    const auto& l = *g.nvlink_active;
    nvlink = {{"links", l.size()}, {"active", std::count(l.begin(), l.end(), true)}};
  }
  return {{"nvml_index", g.index},
          {"sm_clock_mhz", opt(g.now.sm_clock_mhz)},
          {"sm_clock_max_mhz", opt(g.sm_clock_max_mhz)},
          {"memory_clock_mhz", opt(g.now.mem_clock_mhz)},
          {"memory_clock_max_mhz", opt(g.mem_clock_max_mhz)},
          {"power_draw_w", opt(g.now.power_draw_w)},
          {"power_limit_w", opt(g.power_limit_w)},
          {"power_default_limit_w", opt(g.power_default_limit_w)},
          {"temperature_c", opt(g.now.temperature_c)},
          {"throttle_reasons", g.now.throttle_reasons ? ojson(g.now.throttle_reason_names) : ojson(nullptr)},
          {"ecc_enabled", opt(g.ecc_enabled)},
          {"ecc_pending", opt(g.ecc_pending)},
          {"persistence_mode", opt(g.persistence_mode)},
          {"mig_enabled", opt(g.mig_enabled)},
          {"pcie_gen", opt(g.pcie_gen)},
          {"pcie_gen_max", opt(g.pcie_gen_max)},
          {"pcie_width", opt(g.pcie_width)},
          {"pcie_width_max", opt(g.pcie_width_max)},
          {"nvlink", nvlink},
          {"unavailable", unavailable}};
}

// Which other GPUs this one can address directly (CUDA's view: NVLink or PCIe peer-to-peer).
ojson peers_json(int device, int count) {
  ojson peers = ojson::array();
  for (int other = 0; other < count; ++other) {
    if (other == device) continue;
    int access = 0, rank = 0, atomics = 0;
    if (cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, device, other) != cudaSuccess) access = 0;
    if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, device, other) != cudaSuccess) rank = -1;
    if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, device, other) != cudaSuccess) {
      atomics = 0;
    }
    peers.push_back({{"device", other}, {"access", access != 0}, {"performance_rank", rank},
                     {"native_atomics", atomics != 0}});
  }
  return peers;
}

std::string text(const ojson& v, const ojson& unavailable, const char* field, const char* unit = "") {
  if (v.is_null()) {
    return unavailable.contains(field) ? "n/a (" + unavailable[field].get<std::string>() + ")" : "n/a";
  }
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt::format("{:.1f}{}", v.get<double>(), unit);
  if (v.is_string()) return v.get<std::string>();
  return v.dump() + unit;
}

void print_nvml(const ojson& n) {
  const auto& u = n["unavailable"];
  const auto line = [](const char* label, const std::string& value) { std::printf("  %-38s %s\n", label, value.c_str()); };
  line("sm clock (now / max)", text(n["sm_clock_mhz"], u, "sm_clock", " MHz") + " / " +
                                   text(n["sm_clock_max_mhz"], u, "sm_clock_max", " MHz"));
  line("memory clock (now / max)", text(n["memory_clock_mhz"], u, "mem_clock", " MHz") + " / " +
                                       text(n["memory_clock_max_mhz"], u, "mem_clock_max", " MHz"));
  line("power (draw / limit)", text(n["power_draw_w"], u, "power_draw", " W") + " / " +
                                   text(n["power_limit_w"], u, "power_limit", " W"));
  line("temperature", text(n["temperature_c"], u, "temperature", " C"));
  std::string reasons = "none";
  if (n["throttle_reasons"].is_null()) {
    reasons = text(n["throttle_reasons"], u, "throttle_reasons");
  } else if (!n["throttle_reasons"].empty()) {
    reasons.clear();
    for (const auto& r : n["throttle_reasons"]) reasons += (reasons.empty() ? "" : ", ") + r.get<std::string>();
  }
  line("throttle reasons", reasons);
  line("ECC enabled", text(n["ecc_enabled"], u, "ecc_mode"));
  line("persistence mode", text(n["persistence_mode"], u, "persistence_mode"));
  line("MIG enabled", text(n["mig_enabled"], u, "mig"));
  line("PCIe (now / max)", "Gen" + text(n["pcie_gen"], u, "pcie_gen") + " x" + text(n["pcie_width"], u, "pcie_width") +
                               " / Gen" + text(n["pcie_gen_max"], u, "pcie_gen_max") + " x" +
                               text(n["pcie_width_max"], u, "pcie_width_max"));
  line("NVLink", n["nvlink"].is_null()                  ? text(n["nvlink"], u, "nvlink")
                 : n["nvlink"]["links"].get<int>() == 0 ? std::string("none (no NVLink link reported)")
                                                        : fmt::format("{} links, {} active", n["nvlink"]["links"].get<int>(),
                                                                      n["nvlink"]["active"].get<int>()));
}

int hw_info(const std::string& format) {
  if (format != "table" && format != "json") throw UsageError("unknown --format '" + format + "' (table, json)");
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", why.c_str());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
  std::string nvml_error;
  const auto nvml = Nvml::load(&nvml_error);
  ojson all = ojson::array();
  for (int i = 0; i < count; ++i) {
    const DeviceFacts d = query_device(i);
    ojson j = to_json(d);
    j["nvml"] = nullptr;
    if (nvml) {
      if (const auto idx = nvml->index_of_pci_bus_id(d.pci_bus_id)) {
        j["nvml"] = nvml_json(nvml->snapshot(*idx));
      } else {
        j["nvml_error"] = "NVML does not list PCI bus id " + d.pci_bus_id;
      }
    } else {
      j["nvml_error"] = nvml_error;
    }
    j["p2p_peers"] = peers_json(i, count);
    all.push_back(j);
  }
  const DeviceFacts first = query_device(0);
  ojson doc{{"hardware_key", hardware_key(first.name, count)}, {"devices", all}};
  if (nvml) {
    doc["driver_version"] = opt(nvml->driver_version());
  } else {
    doc["nvml_error"] = nvml_error;
  }
  if (format == "json") {
    std::puts(doc.dump(2).c_str());
    return 0;
  }
  std::printf("hardware key: %s\n", doc["hardware_key"].get<std::string>().c_str());
  if (!nvml) std::printf("NVML: unavailable (%s): no clocks, power or link telemetry\n", nvml_error.c_str());
  for (const auto& d : all) {
    std::printf("\n");
    for (const auto& [k, v] : d.items()) {
      if (k == "nvml" || k == "p2p_peers" || k == "nvml_error") continue;
      std::printf("  %-38s %s\n", k.c_str(), v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
    }
    if (!d["nvml"].is_null()) print_nvml(d["nvml"]);
    if (d.contains("nvml_error") && nvml) std::printf("  %-38s %s\n", "nvml", d["nvml_error"].get<std::string>().c_str());
    std::string peers;
    for (const auto& p : d["p2p_peers"]) {
      if (!p["access"].get<bool>()) continue;
      peers += fmt::format("{}GPU {} (rank {}{})", peers.empty() ? "" : ", ", p["device"].get<int>(),
                           p["performance_rank"].get<int>(), p["native_atomics"].get<bool>() ? ", atomics" : "");
    }
    std::printf("  %-38s %s\n", "peer access (CUDA)", count < 2 ? "one GPU visible" : peers.empty() ? "none" : peers.c_str());
  }
  return 0;
}

struct PeaksCli {
  bool refresh = false;
  std::string format = "table";
  int device = 0;
  std::string dir = "artifacts/peaks";
  std::vector<std::string> only;
};

}  // namespace

int run_hw_peaks(int device, const std::string& dir, const std::vector<std::string>& only, bool refresh,
                 const std::string& format) {
  if (format != "table" && format != "json") throw UsageError("unknown --format '" + format + "' (table, json)");
  std::vector<std::string> groups;
  for (const auto& item : only) {
    std::size_t start = 0;
    while (start <= item.size()) {
      const auto comma = item.find(',', start);
      const std::string g = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!g.empty()) groups.push_back(g);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  expected_ceilings(groups, 0, 1);  // an unknown group is bad input before any GPU work
  // Under compute-sanitizer, ncu, nsys or any CUDA injection the probes would time the tool: refused
  // before any CUDA call, with the usage code (the invocation is wrong, not the GPU). docs/ceilings.md.
  if (const auto tool = detect_instrumentation(process_environment())) {
    std::fprintf(stderr, "aisp: hw peaks: %s\n", instrumentation_refusal(*tool).c_str());
    return static_cast<int>(ExitCode::usage);
  }
  std::string why;
  if (cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", why.c_str());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
  PeaksOptions o;
  o.device = device;
  o.groups = groups;
  o.refresh = refresh;
  o.dir = dir;
  o.progress = [](const std::string& line) { std::fprintf(stderr, "[peaks] %s\n", line.c_str()); };
  PeaksOutcome r;
  try {
    r = measure_peaks(o);
  } catch (const MeasurementRefused& e) {
    std::fprintf(stderr, "aisp: hw peaks: %s\n", e.what());
    return static_cast<int>(ExitCode::usage);
  }
  const PeaksReport report{r.set, r.path, r.cache_note, r.measured, r.errors};
  if (format == "json") {
    std::puts(peaks_report_json(report).dump(2).c_str());
  } else {
    std::fputs(render_peaks_table(report).c_str(), stdout);
  }
  return static_cast<int>(r.errors.empty() ? ExitCode::ok : ExitCode::verdict_failure);
}

void add_hw_commands(CLI::App& app, Context& ctx) {
  auto* hw = app.add_subcommand("hw", "facts about this machine's GPUs");
  hw->require_subcommand(1);
  auto format = std::make_shared<std::string>("table");
  auto* info = hw->add_subcommand("info", "device facts and NVML telemetry (clocks, power, ECC, PCIe, NVLink)");
  info->add_option("--format", *format, "table or json")->capture_default_str();
  info->callback([format, &ctx] { ctx.exit_code = hw_info(*format); });

  auto p = std::make_shared<PeaksCli>();
  auto* peaks = hw->add_subcommand("peaks", "this GPU's ceilings, measured and validated by aisp's own probes "
                                            "(cached per GPU UUID and driver; datasheet beside). Refused under "
                                            "compute-sanitizer, ncu, nsys or any CUDA injection: exit 2");
  peaks->add_flag("--refresh", p->refresh, "measure again even what the cache holds");
  peaks->add_option("--format", p->format, "table or json")->capture_default_str();
  peaks->add_option("--device", p->device, "CUDA device index")->capture_default_str()->check(non_negative());
  peaks->add_option("--peaks-dir", p->dir, "folder of the cache files")->capture_default_str();
  peaks->add_option("--only", p->only,
                    "probe groups (comma-separated or repeated): dram, l2, smem, compute, tensor, host, disk, p2p, launch");
  peaks->callback([p, &ctx] { ctx.exit_code = run_hw_peaks(p->device, p->dir, p->only, p->refresh, p->format); });
}

}  // namespace aisp::cli
