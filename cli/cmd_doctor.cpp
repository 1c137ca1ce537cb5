// `aisp doctor`: audit this host and its GPUs against the performance checklist. The checks live in
// core/doctor_*.cpp (rules, /proc and /sys readers, rendering) and device/doctor_gpu.cpp (NVML,
// CUDA versions); this file parses options, runs the selected groups and prints. docs/doctor.md
// lists every check.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/doctor/doctor.hpp"
#include "core/base/error.hpp"
#include "core/measure/verdict.hpp"
#include "device/nvml.hpp"

namespace aisp::cli {

namespace {

struct DoctorOptions {
  std::string format = "table";
  std::vector<std::string> only;
  std::string root = "/";
};

std::set<doctor::Group> parse_groups(const std::vector<std::string>& only) {
  std::set<doctor::Group> groups;
  for (const auto& name : only) {
    const auto g = doctor::group_from_string(name);
    if (!g) throw UsageError("unknown --only section '" + name + "' (gpu, host, env, tools)");
    groups.insert(*g);
  }
  if (groups.empty())
    groups = {doctor::Group::gpu, doctor::Group::host, doctor::Group::env, doctor::Group::tools};
  return groups;
}

int run_doctor(const DoctorOptions& opt) {
  const auto format = doctor::format_from_string(opt.format);
  if (!format) throw UsageError("unknown --format '" + opt.format + "' (table, json, markdown)");
  const auto groups = parse_groups(opt.only);

  doctor::HostContext host = doctor::HostContext::from_process();
  host.root = opt.root;
  // Under a recorded tree the tools found are fixtures, not programs to run.
  host.allow_exec = opt.root == "/";

  std::vector<doctor::Finding> findings;
  if (groups.contains(doctor::Group::gpu)) {
    GpuInventory inv;
    try {
      inv = read_gpu_inventory(host.root);
    } catch (const std::exception& e) {
      // The report matters more than any one reader: record the failure and carry on.
      inv = GpuInventory{};
      inv.nvml_error = std::string("reading the GPUs failed: ") + e.what();
    }
    findings = doctor::run_gpu_checks(inv, doctor::read_numa_facts(host));
  }
  const auto rest = doctor::run_host_checks(host, groups);
  findings.insert(findings.end(), rest.begin(), rest.end());

  const std::string out = doctor::render(findings, *format);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return doctor::exit_code_for(findings) != 0 ? static_cast<int>(ExitCode::verdict_failure)
                                              : static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_doctor_command(CLI::App& app, Context& ctx) {
  auto opt = std::make_shared<DoctorOptions>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "audit this host and its GPUs against the performance checklist (exit 1 on any 'fail'; "
      "docs/doctor.md lists the checks)");
  cmd->add_option("--format", opt->format, "table, json or markdown")->capture_default_str();
  cmd->add_option("--only", opt->only,
                  "only these sections: gpu, host, env, tools (comma-separated)")
      ->delimiter(',');
  // Hidden: point the /proc and /sys readers at a recorded tree (tests/cpu/fixtures/doctor/<case>).
  cmd->add_option("--root", opt->root, "read /proc and /sys under this directory")->group("");
  cmd->callback([opt, &ctx] { ctx.exit_code = run_doctor(*opt); });
}

}  // namespace aisp::cli
