#include "core/ceilings/ceilings.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/base/hardware_key.hpp"

namespace aisp {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const CeilingEntry* CeilingSet::find(std::string_view name) const {
  for (const auto& c : entries) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::optional<double> CeilingSet::value(std::string_view name) const {
  const CeilingEntry* c = find(name);
  if (!c || !c->measured()) return std::nullopt;
  return c->value;
}

void CeilingSet::upsert(CeilingEntry c) {
  for (auto& e : entries) {
    if (e.name == c.name) {
      e = std::move(c);
      return;
    }
  }
  entries.push_back(std::move(c));
}

ojson to_json(const CeilingEntry& c) {
  return ojson{{"name", c.name},         {"group", c.group},     {"unit", c.unit},
               {"value", c.value},       {"method", c.method},   {"note", c.note},
               {"skipped", c.skipped},   {"samples", c.samples}, {"measured_utc", c.measured_utc}};
}

CeilingEntry ceiling_entry_from_json(const nlohmann::json& j) {
  try {
    CeilingEntry c;
    c.name = j.at("name").get<std::string>();
    c.group = j.at("group").get<std::string>();
    c.unit = j.at("unit").get<std::string>();
    c.value = j.at("value").get<double>();
    c.method = j.at("method").get<std::string>();
    c.note = j.at("note").get<std::string>();
    c.skipped = j.at("skipped").get<std::string>();
    c.samples = j.at("samples").get<std::size_t>();
    c.measured_utc = j.at("measured_utc").get<std::string>();
    if (c.name.empty()) throw DataError("a ceiling without a name");
    if (c.unit != k_unit_gb_s && c.unit != k_unit_tflop_s && c.unit != k_unit_us) {
      throw DataError(fmt::format("ceiling '{}' has unknown unit '{}'", c.name, c.unit));
    }
    // A measured value must be a positive finite number: anything else is not a measurement.
    if (c.skipped.empty() && !(std::isfinite(c.value) && c.value > 0)) {
      throw DataError(fmt::format("ceiling '{}' has value {} (not a positive number)", c.name, c.value));
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed ceiling: ") + e.what());
  }
}

namespace {

template <class T>
ojson opt(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

template <class T>
std::optional<T> opt_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

ojson pairs_json(const std::vector<std::pair<std::string, std::string>>& v) {
  ojson out = ojson::array();
  for (const auto& [name, reason] : v) out.push_back({{"name", name}, {"reason", reason}});
  return out;
}

ojson to_json(const GpuTelemetry& t) {
  return ojson{{"sm_clock_mhz", opt(t.sm_clock_mhz)},
               {"memory_clock_mhz", opt(t.mem_clock_mhz)},
               {"power_draw_w", opt(t.power_draw_w)},
               {"temperature_c", opt(t.temperature_c)},
               {"throttle_reasons", t.throttle_reasons ? ojson(t.throttle_reason_names) : ojson(nullptr)}};
}

GpuTelemetry telemetry_from_json(const nlohmann::json& j) {
  GpuTelemetry t;
  t.sm_clock_mhz = opt_from<unsigned>(j, "sm_clock_mhz");
  t.mem_clock_mhz = opt_from<unsigned>(j, "memory_clock_mhz");
  t.power_draw_w = opt_from<double>(j, "power_draw_w");
  t.temperature_c = opt_from<unsigned>(j, "temperature_c");
  if (j.contains("throttle_reasons") && !j.at("throttle_reasons").is_null()) {
    // Only the names are stored; a zero mask marks the reasons as read, so they are written back.
    t.throttle_reason_names = j.at("throttle_reasons").get<std::vector<std::string>>();
    t.throttle_reasons = 0;
  }
  return t;
}

ojson to_json(const CeilingProvenance& p) {
  return ojson{{"git_dirty", p.git_dirty},
               {"build_type", p.build_type},
               {"written_utc", p.written_utc},
               {"tool_free", p.tool_free},
               {"tools_checked", p.tools_checked},
               {"datasheet_rule", p.datasheet_rule},
               {"gpu_state", p.gpu_state ? to_json(*p.gpu_state) : ojson(nullptr)},
               {"refused", pairs_json(p.refused)},
               {"unconfirmed", p.unconfirmed}};
}

CeilingProvenance provenance_from_json(const nlohmann::json& j) {
  CeilingProvenance p;
  p.git_dirty = j.at("git_dirty").get<std::string>();
  p.build_type = j.at("build_type").get<std::string>();
  p.written_utc = j.at("written_utc").get<std::string>();
  p.tool_free = j.at("tool_free").get<bool>();
  p.tools_checked = j.at("tools_checked").get<std::string>();
  p.datasheet_rule = j.at("datasheet_rule").get<std::string>();
  if (!j.at("gpu_state").is_null()) p.gpu_state = telemetry_from_json(j.at("gpu_state"));
  for (const auto& r : j.at("refused")) {
    p.refused.emplace_back(r.at("name").get<std::string>(), r.at("reason").get<std::string>());
  }
  p.unconfirmed = j.at("unconfirmed").get<std::vector<std::string>>();
  return p;
}

}  // namespace

ojson to_json(const CeilingSet& s) {
  ojson entries = ojson::array();
  for (const auto& c : s.entries) entries.push_back(to_json(c));
  // A set without provenance has the version-1 shape and says so: a results.json that carries a set
  // from an old cache stays byte-for-byte what it was.
  ojson j{{"schema", k_peaks_schema_name},
          {"schema_version", s.provenance ? k_peaks_schema_version : 1},
          {"gpu",
           {{"name", s.gpu_name},
            {"uuid", s.gpu_uuid},
            {"hardware_key", s.hardware_key},
            {"compute_capability", s.cc},
            {"sm_count", s.sm_count},
            {"l2_bytes", s.l2_bytes}}},
          {"driver_version", s.driver_version},
          {"aisp_git_sha", s.aisp_git_sha}};
  if (s.provenance) j["provenance"] = to_json(*s.provenance);
  j["ceilings"] = entries;
  return j;
}

CeilingSet ceiling_set_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object() || j.value("schema", "") != k_peaks_schema_name) {
      throw DataError("not an aisp peaks document (missing \"schema\": \"aisp.peaks\")");
    }
    const int version = j.at("schema_version").get<int>();
    if (version > k_peaks_schema_version) {
      throw DataError(fmt::format("peaks schema version {} is newer than this aisp reads ({})", version,
                                  k_peaks_schema_version));
    }
    if (version < 1) throw DataError(fmt::format("peaks schema version {} does not exist", version));
    CeilingSet s;
    const auto& g = j.at("gpu");
    s.gpu_name = g.at("name").get<std::string>();
    s.gpu_uuid = g.at("uuid").get<std::string>();
    s.hardware_key = g.at("hardware_key").get<std::string>();
    s.cc = g.at("compute_capability").get<int>();
    s.sm_count = g.at("sm_count").get<int>();
    s.l2_bytes = g.at("l2_bytes").get<std::int64_t>();
    s.driver_version = j.at("driver_version").get<std::string>();
    s.aisp_git_sha = j.at("aisp_git_sha").get<std::string>();
    if (version >= 2) s.provenance = provenance_from_json(j.at("provenance"));
    for (const auto& c : j.at("ceilings")) {
      CeilingEntry e = ceiling_entry_from_json(c);
      if (s.find(e.name)) throw DataError("ceiling '" + e.name + "' appears twice");
      s.entries.push_back(std::move(e));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed peaks document: ") + e.what());
  }
}

namespace {

struct Known {
  std::string_view name;
  std::string_view label;
};

constexpr Known k_labels[] = {
    {"dram_read", "DRAM read"},
    {"dram_write", "DRAM write"},
    {"dram_copy", "DRAM copy (read + write)"},
    {"l2_read", "L2 read (working set in L2)"},
    {"smem_read", "shared memory read"},
    {"fp32_fma", "FP32 FMA (CUDA cores)"},
    {"fp64_fma", "FP64 FMA (CUDA cores)"},
    {"tensor_bf16", "BF16 tensor (dense)"},
    {"tensor_fp16", "FP16 tensor (dense)"},
    {"tensor_tf32", "TF32 tensor (dense)"},
    {"tensor_fp8", "FP8 e4m3 tensor (dense)"},
    {"h2d_pinned", "host -> device, pinned"},
    {"d2h_pinned", "device -> host, pinned"},
    {"h2d_pageable", "host -> device, pageable"},
    {"d2h_pageable", "device -> host, pageable"},
    {"disk_read", "disk sequential read (O_DIRECT)"},
    {"p2p", "GPU <-> GPU"},
    {"launch_kernel", "kernel launch, back to back"},
    {"launch_graph_node", "graph node launch"},
    {"launch_roundtrip", "launch + synchronize"},
    {"empty_kernel", "empty kernel (event pair)"},
    {"timer_noise_floor", "timer noise floor (event pair)"},
};

struct GroupNames {
  std::string_view group;
  std::vector<std::string_view> names;
};

const std::vector<GroupNames>& group_table() {
  static const std::vector<GroupNames> table{
      {"dram", {"dram_read", "dram_write", "dram_copy"}},
      {"l2", {"l2_read"}},
      {"smem", {"smem_read"}},
      {"compute", {"fp32_fma", "fp64_fma"}},
      {"tensor", {"tensor_bf16", "tensor_fp16", "tensor_tf32", "tensor_fp8"}},
      {"host", {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"}},
      {"disk", {"disk_read"}},  // the file system of aisp_cache_dir(): a host property, like "host"
      {"p2p", {}},  // per pair, see expected_ceilings
      {"launch",
       {"launch_kernel", "launch_graph_node", "launch_roundtrip", "empty_kernel", "timer_noise_floor"}},
  };
  return table;
}

}  // namespace

std::string p2p_ceiling_name(int from, int to, bool peer) {
  return fmt::format("p2p_{}_to_{}_{}", from, to, peer ? "peer" : "staged");
}

std::string ceiling_label(std::string_view name) {
  for (const auto& k : k_labels) {
    if (k.name == name) return std::string(k.label);
  }
  int from = 0, to = 0;
  char mode[16] = {};
  const std::string s(name);
  if (std::sscanf(s.c_str(), "p2p_%d_to_%d_%15s", &from, &to, mode) == 3) {
    return fmt::format("GPU {} -> GPU {}, {}", from, to,
                       std::string(mode) == "peer" ? "peer access" : "staged (no peer access)");
  }
  return s;
}

const std::vector<std::string>& ceiling_groups() {
  static const std::vector<std::string> groups = [] {
    std::vector<std::string> g;
    for (const auto& e : group_table()) g.emplace_back(e.group);
    return g;
  }();
  return groups;
}

std::vector<std::string> placement_groups() { return {"dram", "l2", "smem", "compute", "tensor", "host", "p2p"}; }

std::vector<std::string> placement_groups_if_cached() { return {"disk"}; }

std::vector<std::string> expected_ceilings(const std::vector<std::string>& groups, int device,
                                           int device_count) {
  std::vector<std::string> out;
  for (const auto& g : groups) {
    const GroupNames* found = nullptr;
    for (const auto& e : group_table()) {
      if (e.group == g) found = &e;
    }
    if (!found) {
      throw UsageError(fmt::format("unknown probe group '{}' (groups: dram, l2, smem, compute, tensor, "
                                   "host, disk, p2p, launch)",
                                   g));
    }
    if (g == "p2p") {
      if (device_count < 2) {
        out.emplace_back("p2p");
        continue;
      }
      for (int peer = 0; peer < device_count; ++peer) {
        if (peer == device) continue;
        for (bool p : {false, true}) {
          out.push_back(p2p_ceiling_name(device, peer, p));
          out.push_back(p2p_ceiling_name(peer, device, p));
        }
      }
      continue;
    }
    for (auto n : found->names) out.emplace_back(n);
  }
  return out;
}

std::string peaks_cache_path(const std::string& dir, std::string_view uuid, std::string_view driver) {
  std::string file = std::string(uuid) + "_" + std::string(driver) + ".json";
  for (char& c : file) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '-';
  }
  return (fs::path(dir) / file).string();
}

namespace {

// What makes a well-formed set unfit to be used or written: "" when nothing does.
std::string untrustworthy(const CeilingSet& s) {
  if (s.provenance && !s.provenance->tool_free) {
    return "it says it was not measured tool-free (provenance.tool_free is false)";
  }
  std::vector<std::string> reasons;
  for (const auto& c : s.entries) {
    if (auto why = implausible_ceiling(s, c)) reasons.push_back(std::move(*why));
  }
  if (reasons.empty()) return "";
  // One line: the first value with its numbers; the count of the others.
  return reasons.size() == 1 ? reasons.front()
                             : fmt::format("{} (and {} more under half the datasheet)", reasons.front(),
                                           reasons.size() - 1);
}

}  // namespace

CacheLoad load_ceiling_cache(const std::string& path, std::string_view expect_uuid,
                             std::string_view expect_driver) {
  CacheLoad r;
  std::error_code ec;
  if (!fs::exists(path, ec)) return r;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  r.status = CacheLoad::Status::corrupt;
  if (!in && !in.eof()) {
    r.problem = "cannot read " + path;
    return r;
  }
  try {
    CeilingSet s = ceiling_set_from_json(nlohmann::json::parse(text.str()));
    if (s.gpu_uuid != expect_uuid) {
      r.problem = fmt::format("it belongs to GPU {}, not {}", s.gpu_uuid, expect_uuid);
      return r;
    }
    if (s.driver_version != expect_driver) {
      r.problem = fmt::format("it was measured under driver {}, not {}", s.driver_version, expect_driver);
      return r;
    }
    if (const std::string why = untrustworthy(s); !why.empty()) {
      r.problem = why;
      return r;
    }
    r.status = CacheLoad::Status::ok;
    r.set = std::move(s);
  } catch (const nlohmann::json::exception& e) {
    r.problem = std::string("not valid JSON: ") + e.what();
  } catch (const DataError& e) {
    r.problem = e.what();
  }
  return r;
}

void save_ceiling_cache(const std::string& path, const CeilingSet& set) {
  if (const std::string why = untrustworthy(set); !why.empty()) {
    throw std::runtime_error(fmt::format("refusing to write {}: {}", path, why));
  }
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message()));
  // Same folder, unique name: the rename is atomic and two writers never share a temporary.
  const fs::path tmp = target.string() + fmt::format(".tmp.{}", static_cast<long>(getpid()));
  {
    std::ofstream out(tmp);
    out << to_json(set).dump(2) << "\n";
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write " + tmp.string());
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot rename {} to {}", tmp.string(), path));
  }
}

std::string quarantine_ceiling_cache(const std::string& path) {
  const std::string aside = path + ".corrupt";
  std::error_code ec;
  fs::rename(path, aside, ec);
  return ec ? std::string() : aside;
}

std::optional<double> Datasheet::value(std::string_view name) const {
  for (const auto& [n, v] : values) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::optional<Datasheet> datasheet_for(std::string_view gpu_name) {
  // NVIDIA H100 / H200 datasheets; tensor rates are the dense ones (half the "with sparsity" figures).
  // HBM bandwidth is the interface peak: no copy reaches it, which is why ceilings are measured.
  const auto compute = [](double fp64, double fp32, double tf32, double bf16, double fp8) {
    return std::vector<std::pair<std::string, double>>{
        {"fp64_fma", fp64},    {"fp32_fma", fp32},    {"tensor_tf32", tf32},
        {"tensor_bf16", bf16}, {"tensor_fp16", bf16}, {"tensor_fp8", fp8}};
  };
  const auto with_memory = [](std::vector<std::pair<std::string, double>> v, double gb_s, double pcie) {
    for (const char* n : {"dram_read", "dram_write", "dram_copy"}) v.emplace_back(n, gb_s);
    for (const char* n : {"h2d_pinned", "d2h_pinned"}) v.emplace_back(n, pcie);
    return v;
  };
  const std::string slug = gpu_model_slug(gpu_name);
  // PCIe Gen5 x16: 64 GB/s per direction before protocol overhead. SMs: 132 on the SXM parts, 114 on
  // the PCIe card (what cudaDevAttrMultiProcessorCount reports on a whole, non-MIG GPU).
  if (slug == "h100_sxm") {
    return Datasheet{"H100 SXM", "NVIDIA H100 datasheet (SXM5), dense",
                     with_memory(compute(34, 67, 494, 989, 1979), 3350, 64), 132};
  }
  if (slug == "h100_pcie") {
    return Datasheet{"H100 PCIe", "NVIDIA H100 datasheet (PCIe), dense",
                     with_memory(compute(26, 51, 378, 756, 1513), 2000, 64), 114};
  }
  if (slug == "h200") {
    return Datasheet{"H200 SXM", "NVIDIA H200 datasheet (SXM), dense",
                     with_memory(compute(34, 67, 494, 989, 1979), 4800, 64), 132};
  }
  return std::nullopt;
}

ojson to_json(const RooflinePlacement& p) {
  return ojson{{"bound", p.bound},
               {"ceiling", p.ceiling},
               {"unit", p.unit},
               {"ceiling_value", p.ceiling_value},
               {"achieved", p.achieved},
               {"percent_of_ceiling", p.percent},
               {"arithmetic_intensity", p.intensity},
               {"floor_ms", p.floor_ms},
               {"physics", p.physics},
               {"physics_floor_ms", p.physics_floor_ms}};
}

RooflinePlacement placement_from_json(const nlohmann::json& j) {
  try {
    RooflinePlacement p;
    p.bound = j.at("bound").get<std::string>();
    p.ceiling = j.at("ceiling").get<std::string>();
    p.unit = j.at("unit").get<std::string>();
    p.ceiling_value = j.at("ceiling_value").get<double>();
    p.achieved = j.at("achieved").get<double>();
    p.percent = j.at("percent_of_ceiling").get<double>();
    p.intensity = j.at("arithmetic_intensity").get<double>();
    p.floor_ms = j.at("floor_ms").get<double>();
    p.physics = j.at("physics").get<std::string>();
    p.physics_floor_ms = j.at("physics_floor_ms").get<double>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed roofline placement: ") + e.what());
  }
}

ojson to_json(const RunCeilings& r) {
  return ojson{{"source", r.source}, {"problem", r.problem}, {"set", to_json(r.set)}};
}

RunCeilings run_ceilings_from_json(const nlohmann::json& j) {
  try {
    RunCeilings r;
    r.source = j.at("source").get<std::string>();
    r.problem = j.at("problem").get<std::string>();
    r.set = ceiling_set_from_json(j.at("set"));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed ceilings: ") + e.what());
  }
}

}  // namespace aisp
