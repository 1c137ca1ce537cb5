// `aisp doctor`: the host and its GPUs audited against the book's performance checklist (appendix
// and the lab's English checklist). A check reads something (a /proc or /sys file, an environment
// variable, an NVML snapshot), applies a rule and returns a Finding. Rules, readers and rendering
// live here, in core/, so they build and are tested without a GPU: every reader takes a filesystem
// root, and the tests point it at recorded /proc and /sys trees
// (tests/cpu/fixtures/doctor/<case>/). The GPU half reads NVML in device/doctor_gpu.cpp and hands
// plain GpuSnapshot values to run_gpu_checks() below.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/gpu_snapshot.hpp"

namespace aisp::doctor {

// ok: as the checklist recommends. info: worth knowing, nothing to fix. warn: costs performance or
// repeatability. fail: makes measurements on this machine wrong or the GPU untrustworthy (the only
// severity that makes `aisp doctor` exit 1). na: could not be read; `found` then says why.
enum class Severity { ok, info, warn, fail, na };

// What --only selects.
enum class Group { gpu, host, env, tools };

std::string_view to_string(Severity s);
std::string_view to_string(Group g);
std::optional<Group> group_from_string(std::string_view s);

struct Finding {
  std::string id;  // stable rule id, e.g. "host.thp", "gpu.ecc_errors" (docs/doctor.md)
  Group group = Group::host;
  std::string subject;      // what was checked: "host", "GPU 0 (NVIDIA H100 80GB HBM3)", "ncu"
  std::string section;      // the checklist section the rule comes from
  std::string source;       // what was read: a path, an NVML call, an environment variable
  std::string found;        // the value found; for Severity::na, the reason it could not be read
  std::string recommended;  // the value the checklist recommends
  Severity severity = Severity::na;
  std::string fix;  // one line; empty when there is nothing to do
};

// Completes a finding whose id, subject, section, source and recommendation are already set.
inline Finding conclude(Finding f, Severity s, std::string found, std::string fix = {}) {
  f.severity = s;
  f.found = std::move(found);
  f.fix = std::move(fix);
  return f;
}

// ---- reading the host ---------------------------------------------------------------------------

// Where the host readers look. Tests set root to a fixture tree and env to a literal map.
struct HostContext {
  std::filesystem::path root{"/"};
  std::map<std::string, std::string> env;
  bool allow_exec =
      true;  // may run `tool --version` when no file next to the tool gives its version

  static HostContext from_process();  // root "/", env from this process's environment

  // An absolute path such as "/proc/meminfo" under root.
  std::filesystem::path at(std::string_view absolute) const;
  std::optional<std::string> getenv(const std::string& name) const;
};

// Whole file; nullopt with *why = "<path>: <strerror>" when it cannot be read.
std::optional<std::string> read_text(const std::filesystem::path& p, std::string* why);

// Linux cpulist syntax ("0-3,8,10-11"); nullopt on malformed input.
std::optional<std::vector<int>> parse_cpulist(std::string_view s);
std::string format_cpulist(const std::vector<int>& cpus);  // sorted, compressed into ranges

// NUMA layout and this process's binding, from /sys/devices/system/node and /proc/self/status.
struct NumaFacts {
  std::vector<int> nodes;  // online NUMA nodes
  std::map<int, std::vector<int>> node_cpus;
  std::vector<int> online_cpus;
  std::vector<int> process_cpus;  // Cpus_allowed_list
  std::vector<int> process_mems;  // Mems_allowed_list
  std::string why_not;            // non-empty when nodes could not be read
};
NumaFacts read_numa_facts(const HostContext& ctx);

// /sys/bus/pci/devices/<bus id>/numa_node; nullopt (with *why) when absent. -1 means "no affinity
// information", which firmware reports on single-socket machines and many VMs.
std::optional<int> read_pci_numa_node(const HostContext& ctx, std::string_view bus_id,
                                      std::string* why);

// Tools: where a profiler lives and its version.
struct ToolInfo {
  std::string name;  // "ncu"
  std::optional<std::filesystem::path> path;
  std::optional<std::string> version;
  std::string version_source;  // the file or command the version came from
  std::string searched;        // the directories looked in (for "not found")
};
ToolInfo find_tool(const HostContext& ctx, std::string_view name);

// ---- the checks ---------------------------------------------------------------------------------

// A host, environment or tools check: reads under ctx.root / ctx.env and returns one finding.
struct HostCheck {
  std::string_view id;
  Group group;
  Finding (*run)(const HostContext& ctx);
};
std::span<const HostCheck> host_checks();  // the table, in report order

// Every host check whose group is in `groups`. A check that throws becomes an n/a finding.
std::vector<Finding> run_host_checks(const HostContext& ctx, const std::set<Group>& groups);

// Pure rules for the environment and tools (doctor_rules.cpp), exposed so tests can feed values.
using EnvMap = std::map<std::string, std::string>;
Finding rule_cuda_visible_devices(const EnvMap& env);
Finding rule_cuda_device_max_connections(const EnvMap& env);
Finding rule_cuda_launch_blocking(const EnvMap& env);
Finding rule_cuda_device_order(const EnvMap& env);
Finding rule_nccl_var(const EnvMap& env, std::string_view var);  // one of nccl_rule_vars()
Finding rule_nccl_other(const EnvMap& env);  // NCCL_* set that no specific rule covers (info)
std::span<const std::string_view> nccl_rule_vars();
Finding rule_tool(const ToolInfo& tool);

// GPU checks: inventory-level rules once (gpu.nvml, gpu.driver, gpu.cuda_compat), then every
// per-GPU rule for each snapshot. With no GPU every per-GPU rule still reports once, as n/a with
// the reason. The table carries what every finding of a rule shares, so that with no GPU
// run_gpu_checks() can still say, per rule, what it would have read; `run` fills found, severity
// and fix into that base.
struct GpuRule {
  std::string_view id;
  std::string_view section;
  std::string_view source;
  std::string_view recommended;
  Finding (*run)(Finding base, const GpuSnapshot& gpu, const GpuInventory& inv,
                 const NumaFacts& numa);
};
std::span<const GpuRule> gpu_rules();
std::vector<Finding> run_gpu_checks(const GpuInventory& inv, const NumaFacts& numa);

// ---- output -------------------------------------------------------------------------------------

enum class Format { table, json, markdown };
std::optional<Format> format_from_string(std::string_view s);

std::string render(std::span<const Finding> findings, Format format);

// 1 when any finding is `fail`, else 0.
int exit_code_for(std::span<const Finding> findings);

}  // namespace aisp::doctor
