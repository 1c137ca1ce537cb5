// aisp doctor: every rule against a good and a bad input. Host rules read recorded /proc and /sys
// trees (fixtures/doctor/{good,bad,empty}) or small trees written on the fly; GPU rules take
// hand-built snapshots; environment rules take literal maps.
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/doctor/doctor.hpp"

namespace aisp::doctor {
namespace {

namespace fs = std::filesystem;

const fs::path k_fixtures = fs::path(AISP_TEST_DATA_DIR) / "fixtures" / "doctor";
const std::set<Group> k_all{Group::gpu, Group::host, Group::env, Group::tools};

HostContext fixture(const std::string& name, EnvMap env = {}) {
  HostContext ctx;
  ctx.root = k_fixtures / name;
  ctx.env = std::move(env);
  ctx.allow_exec = false;
  return ctx;
}

std::map<std::string, Finding> by_id(const std::vector<Finding>& findings) {
  std::map<std::string, Finding> out;
  for (const auto& f : findings) out.emplace(f.id, f);
  return out;
}

std::map<std::string, Finding> run_case(const std::string& name, EnvMap env = {}) {
  return by_id(run_host_checks(fixture(name, std::move(env)), k_all));
}

// A throwaway root for edge cases that do not deserve a fixture tree of their own.
class TempRoot {
 public:
  TempRoot() {
    std::random_device rd;
    m_root = fs::temp_directory_path() / ("aisp_doctor_" + std::to_string(rd()));
    fs::create_directories(m_root);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(m_root, ec);
  }
  void write(const std::string& absolute, const std::string& text) const {
    const fs::path p = m_root / fs::path(absolute).relative_path();
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void write_executable(const std::string& absolute, const std::string& text) const {
    write(absolute, text);
    fs::permissions(m_root / fs::path(absolute).relative_path(), fs::perms::owner_all);
  }
  HostContext ctx() const {
    HostContext c;
    c.root = m_root;
    c.allow_exec = false;
    return c;
  }

 private:
  fs::path m_root;
};

// ---- readers ------------------------------------------------------------------------------------

TEST(DoctorReaders, ParseCpulist) {
  EXPECT_EQ(parse_cpulist("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpulist(""), std::vector<int>{});
  EXPECT_FALSE(parse_cpulist("3-1"));
  EXPECT_FALSE(parse_cpulist("a"));
  EXPECT_FALSE(parse_cpulist("1,,2"));
}

TEST(DoctorReaders, FormatCpulistCompressesRanges) {
  EXPECT_EQ(format_cpulist({3, 0, 1, 2, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpulist({}), "none");
}

TEST(DoctorReaders, NormalizePciBusId) {
  EXPECT_EQ(normalize_pci_bus_id("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalize_pci_bus_id("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("1:3b:00.0"), "0001:3b:00.0");
}

TEST(DoctorReaders, ThrottleReasonNames) {
  EXPECT_EQ(throttle_reason_names(0), std::vector<std::string>{});
  EXPECT_EQ(throttle_reason_names(throttle::gpu_idle | throttle::hw_thermal),
            (std::vector<std::string>{"gpu_idle", "hw_thermal_slowdown"}));
  EXPECT_EQ(throttle_reason_names(0x1000), std::vector<std::string>{"0x1000"});
}

TEST(DoctorReaders, NumaFactsFromFixture) {
  const NumaFacts n = read_numa_facts(fixture("good"));
  EXPECT_EQ(n.nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(n.node_cpus.at(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(n.process_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(n.process_mems, std::vector<int>{0});
  EXPECT_EQ(n.online_cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST(DoctorReaders, PciNumaNode) {
  std::string why;
  EXPECT_EQ(read_pci_numa_node(fixture("good"), "00000000:18:00.0", &why), 0);
  EXPECT_EQ(read_pci_numa_node(fixture("bad"), "0000:18:00.0", &why), -1);
  EXPECT_FALSE(read_pci_numa_node(fixture("good"), "0000:99:00.0", &why));
  EXPECT_NE(why.find("/sys/bus/pci/devices/0000:99:00.0/numa_node"), std::string::npos) << why;
}

// ---- the table ----------------------------------------------------------------------------------

TEST(DoctorTable, EveryCheckReportsItsOwnIdAndGroup) {
  for (const char* c : {"good", "bad", "empty"}) {
    const auto ctx = fixture(c);
    for (const auto& check : host_checks()) {
      const Finding f = check.run(ctx);
      EXPECT_EQ(f.id, check.id) << c;
      EXPECT_EQ(f.group, check.group) << check.id;
      EXPECT_FALSE(f.found.empty()) << check.id << " in " << c;
      EXPECT_FALSE(f.recommended.empty()) << check.id;
      EXPECT_FALSE(f.section.empty()) << check.id;
    }
  }
}

TEST(DoctorTable, OnlyFiltersGroups) {
  const auto f = run_host_checks(fixture("good"), {Group::env});
  ASSERT_FALSE(f.empty());
  for (const auto& x : f) EXPECT_EQ(x.group, Group::env) << x.id;
}

TEST(DoctorTable, EmptyRootNeverCrashesAndExplainsEveryNa) {
  for (const auto& f : run_host_checks(fixture("empty"), k_all)) {
    EXPECT_TRUE(f.severity == Severity::na || f.severity == Severity::ok ||
                f.severity == Severity::warn || f.severity == Severity::info)
        << f.id;
    if (f.severity == Severity::na) {
      EXPECT_GT(f.found.size(), 10u) << f.id << ": " << f.found;
    }
  }
}

TEST(DoctorTable, DocsListEveryCheck) {
  std::string why;
  const auto doc =
      read_text(fs::path(AISP_TEST_DATA_DIR) / ".." / ".." / "docs" / "doctor.md", &why);
  ASSERT_TRUE(doc) << why;
  for (const auto& c : host_checks())
    EXPECT_NE(doc->find(std::string(c.id)), std::string::npos) << c.id;
  for (const auto& r : gpu_rules())
    EXPECT_NE(doc->find(std::string(r.id)), std::string::npos) << r.id;
  for (const char* id : {"gpu.nvml", "gpu.driver", "gpu.cuda_compat"}) {
    EXPECT_NE(doc->find(id), std::string::npos) << id;
  }
}

// ---- host rules: good and bad fixtures ----------------------------------------------------------

struct HostCase {
  const char* id;
  Severity good;
  Severity bad;
  const char* bad_found;  // a substring of the bad finding's value
};

class HostRule : public ::testing::TestWithParam<HostCase> {};

TEST_P(HostRule, GoodAndBadFixtures) {
  static const auto good = run_case("good");
  static const auto bad = run_case("bad");
  const HostCase& c = GetParam();
  ASSERT_TRUE(good.contains(c.id));
  ASSERT_TRUE(bad.contains(c.id));
  EXPECT_EQ(good.at(c.id).severity, c.good) << good.at(c.id).found;
  EXPECT_EQ(bad.at(c.id).severity, c.bad) << bad.at(c.id).found;
  EXPECT_NE(bad.at(c.id).found.find(c.bad_found), std::string::npos) << bad.at(c.id).found;
  if (c.bad == Severity::warn || c.bad == Severity::fail) {
    EXPECT_FALSE(bad.at(c.id).fix.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Doctor, HostRule,
    ::testing::Values(HostCase{"host.kernel", Severity::info, Severity::info, "5.15.0-1061-aws"},
                      HostCase{"host.container", Severity::ok, Severity::info, "docker"},
                      HostCase{"host.vm", Severity::ok, Severity::info, "QEMU"},
                      HostCase{"host.cpu_model", Severity::info, Severity::info,
                               "Arm implementer 0x41 part 0xd4f (4 logical CPUs)"},
                      HostCase{"host.cpu_governor", Severity::ok, Severity::warn, "powersave x2"},
                      HostCase{"host.smt", Severity::ok, Severity::info, "on"},
                      HostCase{"host.thp", Severity::ok, Severity::warn, "never"},
                      HostCase{"host.swap", Severity::ok, Severity::warn, "8.0 GiB"},
                      HostCase{"host.swappiness", Severity::ok, Severity::warn, "60"},
                      HostCase{"host.memlock", Severity::ok, Severity::warn, "64 KiB"},
                      HostCase{"host.numa", Severity::ok, Severity::warn, "not bound"},
                      HostCase{"host.shm", Severity::ok, Severity::warn, "64 MiB"},
                      HostCase{"host.irqbalance", Severity::info, Severity::na, "container"}),
    [](const auto& info) {
      std::string n = info.param.id;
      for (char& ch : n) ch = (ch == '.') ? '_' : ch;
      return n;
    });

TEST(DoctorHost, GoodValuesAreReported) {
  const auto good = run_case("good");
  EXPECT_EQ(good.at("host.thp").found, "madvise");
  EXPECT_EQ(good.at("host.shm").found, "16 GiB");
  EXPECT_EQ(good.at("host.memlock").found, "unlimited");
  EXPECT_NE(good.at("host.cpu_model").found.find("Xeon"), std::string::npos);
}

TEST(DoctorHost, ShmSizeForms) {
  TempRoot t;
  t.write("/proc/meminfo", "MemTotal: 4194304 kB\nSwapTotal: 0 kB\n");  // 4 GiB
  t.write("/proc/self/mounts", "tmpfs /dev/shm tmpfs rw,size=50% 0 0\n");
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.shm").found, "2 GiB");
  t.write("/proc/self/mounts", "tmpfs /dev/shm tmpfs rw,nosuid 0 0\n");  // default: half of RAM
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.shm").severity, Severity::ok);
  t.write("/proc/self/mounts", "proc /proc proc rw 0 0\n");
  const auto f = by_id(run_host_checks(t.ctx(), {Group::host})).at("host.shm");
  EXPECT_EQ(f.severity, Severity::warn);
  EXPECT_EQ(f.found, "/dev/shm not mounted");
}

TEST(DoctorHost, SwappinessMattersOnlyWithSwap) {
  TempRoot t;
  t.write("/proc/sys/vm/swappiness", "60\n");
  t.write("/proc/meminfo", "MemTotal: 4194304 kB\nSwapTotal: 0 kB\n");
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.swappiness").severity,
            Severity::ok);
  t.write("/proc/meminfo", "MemTotal: 4194304 kB\nSwapTotal: 1024 kB\n");
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.swappiness").severity,
            Severity::warn);
}

TEST(DoctorHost, IrqbalanceOnSingleNodeHostIsOk) {
  TempRoot t;
  t.write("/proc/1/comm", "systemd\n");
  t.write("/sys/devices/system/node/online", "0\n");
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.irqbalance").severity,
            Severity::ok);
  t.write("/sys/devices/system/node/online", "0-1\n");
  EXPECT_EQ(by_id(run_host_checks(t.ctx(), {Group::host})).at("host.irqbalance").severity,
            Severity::info);
}

TEST(DoctorHost, UnrecognizedThpIsNaWithTheContent) {
  TempRoot t;
  t.write("/sys/kernel/mm/transparent_hugepage/enabled", "garbage\n");
  const auto f = by_id(run_host_checks(t.ctx(), {Group::host})).at("host.thp");
  EXPECT_EQ(f.severity, Severity::na);
  EXPECT_NE(f.found.find("garbage"), std::string::npos);
}

// ---- tools --------------------------------------------------------------------------------------

TEST(DoctorTools, VersionsFromFilesNextToTheTools) {
  const auto ctx = fixture("good", {{"PATH", "/usr/bin"}});
  const ToolInfo ncu = find_tool(ctx, "ncu");
  ASSERT_TRUE(ncu.path);
  EXPECT_EQ(ncu.path->string(), "/usr/local/cuda/bin/ncu");
  // The wrapper's comments name 2019.4.0 and /opt/nvidia holds an older 2024.1.0: the newest
  // install directory is what the wrapper runs.
  EXPECT_EQ(ncu.version, "2025.3.1");
  EXPECT_EQ(ncu.version_source, "install directory /usr/local/cuda/nsight-compute-2025.3.1");
  const ToolInfo nsys = find_tool(ctx, "nsys");
  EXPECT_EQ(nsys.version, "2025.5.1");  // from the symlink's target directory
  const ToolInfo san = find_tool(ctx, "compute-sanitizer");
  EXPECT_EQ(san.version, "13.0.85");  // from version.json
  EXPECT_EQ(san.version_source, "/usr/local/cuda/version.json");
  EXPECT_EQ(rule_tool(ncu).severity, Severity::ok);
  EXPECT_EQ(rule_tool(san).id, "tools.compute_sanitizer");
}

TEST(DoctorTools, VersionFromRunningTheToolAsLastResort) {
  TempRoot t;
  t.write_executable(
      "/opt/bin/nsys",
      "#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.3.2.474-253236389321v0'\n");
  HostContext ctx = t.ctx();
  ctx.env = {{"PATH", "/opt/bin"}};
  EXPECT_FALSE(find_tool(ctx, "nsys").version);  // exec not allowed: found, version unknown
  ctx.allow_exec = true;
  if (struct statvfs sv; statvfs(ctx.root.c_str(), &sv) == 0 && (sv.f_flag & ST_NOEXEC)) {
    GTEST_SKIP() << "the temporary directory is mounted noexec";
  }
  const ToolInfo nsys = find_tool(ctx, "nsys");
  EXPECT_EQ(nsys.version, "2025.3.2.474");
  EXPECT_EQ(nsys.version_source, "/opt/bin/nsys --version");
}

TEST(DoctorTools, MissingToolWarnsAndUnknownVersionInforms) {
  const ToolInfo none = find_tool(fixture("empty", {{"PATH", "/usr/bin:/bin"}}), "ncu");
  EXPECT_FALSE(none.path);
  const Finding f = rule_tool(none);
  EXPECT_EQ(f.severity, Severity::warn);
  EXPECT_NE(f.source.find("/usr/bin:/bin:/usr/local/cuda/bin"), std::string::npos) << f.source;
  ToolInfo unknown{"nsys", fs::path("/opt/nsys"), std::nullopt, "", ""};
  EXPECT_EQ(rule_tool(unknown).severity, Severity::info);
}

// ---- environment --------------------------------------------------------------------------------

TEST(DoctorEnv, CudaVisibleDevices) {
  EXPECT_EQ(rule_cuda_visible_devices({}).severity, Severity::ok);
  EXPECT_EQ(rule_cuda_visible_devices({{"CUDA_VISIBLE_DEVICES", ""}}).severity, Severity::warn);
  EXPECT_EQ(rule_cuda_visible_devices({{"CUDA_VISIBLE_DEVICES", "-1"}}).severity, Severity::warn);
  EXPECT_EQ(rule_cuda_visible_devices({{"CUDA_VISIBLE_DEVICES", "0,1"}}).severity, Severity::info);
}

TEST(DoctorEnv, CudaDeviceMaxConnections) {
  EXPECT_EQ(rule_cuda_device_max_connections({}).severity, Severity::ok);
  EXPECT_EQ(rule_cuda_device_max_connections({{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}).severity,
            Severity::warn);
  EXPECT_EQ(rule_cuda_device_max_connections({{"CUDA_DEVICE_MAX_CONNECTIONS", "x"}}).severity,
            Severity::warn);
  EXPECT_EQ(rule_cuda_device_max_connections({{"CUDA_DEVICE_MAX_CONNECTIONS", "16"}}).severity,
            Severity::info);
}

TEST(DoctorEnv, CudaLaunchBlockingFails) {
  EXPECT_EQ(rule_cuda_launch_blocking({}).severity, Severity::ok);
  EXPECT_EQ(rule_cuda_launch_blocking({{"CUDA_LAUNCH_BLOCKING", "0"}}).severity, Severity::ok);
  const Finding f = rule_cuda_launch_blocking({{"CUDA_LAUNCH_BLOCKING", "1"}});
  EXPECT_EQ(f.severity, Severity::fail);
  EXPECT_EQ(exit_code_for(std::vector<Finding>{f}), 1);
}

TEST(DoctorEnv, CudaDeviceOrder) {
  EXPECT_EQ(rule_cuda_device_order({{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}).severity, Severity::ok);
  EXPECT_EQ(rule_cuda_device_order({}).severity, Severity::info);
}

TEST(DoctorEnv, NcclVariables) {
  struct Case {
    const char* var;
    const char* bad;
    Severity bad_sev;
    const char* fine;
  };
  for (const Case c : {Case{"NCCL_P2P_DISABLE", "1", Severity::warn, "0"},
                       Case{"NCCL_SHM_DISABLE", "1", Severity::warn, "0"},
                       Case{"NCCL_IB_DISABLE", "1", Severity::warn, "0"},
                       Case{"NCCL_P2P_LEVEL", "LOC", Severity::warn, "NVL"},
                       Case{"NCCL_NET_GDR_LEVEL", "LOC", Severity::warn, "PHB"},
                       Case{"NCCL_ALGO", "Ring", Severity::info, nullptr},
                       Case{"NCCL_PROTO", "Simple", Severity::info, nullptr},
                       Case{"NCCL_DEBUG", "TRACE", Severity::warn, "INFO"}}) {
    EXPECT_EQ(rule_nccl_var({}, c.var).severity, Severity::ok) << c.var;
    const Finding bad = rule_nccl_var({{c.var, c.bad}}, c.var);
    EXPECT_EQ(bad.severity, c.bad_sev) << c.var;
    EXPECT_FALSE(bad.fix.empty()) << c.var;
    if (c.fine) {
      EXPECT_EQ(rule_nccl_var({{c.var, c.fine}}, c.var).severity, Severity::ok) << c.var;
    }
  }
  EXPECT_EQ(nccl_rule_vars().size(), 8u);
}

TEST(DoctorEnv, OtherNcclVariablesAreListed) {
  EXPECT_EQ(rule_nccl_other({{"NCCL_P2P_DISABLE", "1"}}).severity, Severity::ok);
  const Finding f = rule_nccl_other({{"NCCL_SOCKET_IFNAME", "eth0"}, {"PATH", "/bin"}});
  EXPECT_EQ(f.severity, Severity::info);
  EXPECT_EQ(f.found, "NCCL_SOCKET_IFNAME=eth0");
}

TEST(DoctorEnv, NcclVersionIsMetadataNotASetting) {
  EXPECT_EQ(rule_nccl_other({{"NCCL_VERSION", "2.28.3-1"}}).severity, Severity::ok);
}

TEST(DoctorEnv, ChecksReadTheContextEnvironment) {
  const auto f = run_case("empty", {{"CUDA_LAUNCH_BLOCKING", "1"}, {"NCCL_SHM_DISABLE", "1"}});
  EXPECT_EQ(f.at("env.cuda_launch_blocking").severity, Severity::fail);
  EXPECT_EQ(f.at("env.nccl_shm_disable").severity, Severity::warn);
}

// ---- GPU rules: hand-built snapshots ------------------------------------------------------------

// A healthy, busy H100 on NUMA node 1 of a two-node host, process bound there.
GpuSnapshot good_gpu() {
  GpuSnapshot g;
  g.index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "0000:18:00.0";
  g.now.sm_clock_mhz = 1980;
  g.now.mem_clock_mhz = 2619;
  g.now.power_draw_w = 650;
  g.now.temperature_c = 55;
  g.now.throttle_reasons = 0;
  g.sm_clock_max_mhz = 1980;
  g.mem_clock_max_mhz = 2619;
  g.power_limit_w = 700;
  g.power_default_limit_w = 700;
  g.ecc_enabled = true;
  g.ecc_pending = true;
  g.ecc_volatile_corrected = 0;
  g.ecc_volatile_uncorrected = 0;
  g.ecc_aggregate_corrected = 0;
  g.ecc_aggregate_uncorrected = 0;
  g.persistence_mode = true;
  g.mig_enabled = false;
  g.mig_pending = false;
  g.pcie_gen = 5;
  g.pcie_gen_max = 5;
  g.pcie_gen_gpu_max = 5;
  g.pcie_width = 16;
  g.pcie_width_max = 16;
  g.nvlink_active = std::vector<bool>(18, true);
  g.numa_node = 1;
  g.cpu_affinity = {2, 3};
  return g;
}

NumaFacts two_nodes(std::vector<int> process_cpus = {2, 3}, std::vector<int> mems = {1}) {
  NumaFacts n;
  n.nodes = {0, 1};
  n.node_cpus = {{0, {0, 1}}, {1, {2, 3}}};
  n.online_cpus = {0, 1, 2, 3};
  n.process_cpus = std::move(process_cpus);
  n.process_mems = std::move(mems);
  return n;
}

GpuInventory inventory(std::vector<GpuSnapshot> gpus) {
  GpuInventory inv;
  inv.driver_version = "580.95.05";
  inv.nvml_cuda_driver_version = 13000;
  inv.cuda_driver_version = 13000;
  inv.cuda_runtime_version = 13000;
  inv.gpus = std::move(gpus);
  return inv;
}

Finding gpu_rule(const std::string& id, const GpuSnapshot& g, const NumaFacts& numa = two_nodes()) {
  const auto f = by_id(run_gpu_checks(inventory({g}), numa));
  EXPECT_TRUE(f.contains(id)) << id;
  return f.contains(id) ? f.at(id) : Finding{};
}

TEST(DoctorGpu, GoodSnapshotIsAllOk) {
  for (const auto& f : run_gpu_checks(inventory({good_gpu()}), two_nodes())) {
    EXPECT_EQ(f.severity, Severity::ok) << f.id << ": " << f.found;
    EXPECT_EQ(f.group, Group::gpu);
  }
}

TEST(DoctorGpu, EveryRuleRunsOncePerGpu) {
  GpuSnapshot second = good_gpu();
  second.index = 1;
  const auto f = run_gpu_checks(inventory({good_gpu(), second}), two_nodes());
  EXPECT_EQ(f.size(), 3 + 2 * gpu_rules().size());
  EXPECT_EQ(f.back().subject, "GPU 1 (NVIDIA H100 80GB HBM3)");
}

TEST(DoctorGpu, NoNvmlMakesEveryGpuCheckNaWithTheReason) {
  GpuInventory inv;
  inv.nvml_error = "NVML not loadable: libnvidia-ml.so.1: cannot open shared object file";
  inv.cuda_runtime_version = 13000;
  inv.cuda_driver_version = 0;
  const auto f = run_gpu_checks(inv, two_nodes());
  ASSERT_EQ(f.size(), 3 + gpu_rules().size());
  for (const auto& x : f) {
    EXPECT_EQ(x.severity, Severity::na) << x.id;
    EXPECT_FALSE(x.found.empty()) << x.id;
  }
  EXPECT_EQ(by_id(f).at("gpu.nvml").found, *inv.nvml_error);
  EXPECT_NE(by_id(f).at("gpu.cuda_compat").found.find("no CUDA driver"), std::string::npos);
  EXPECT_EQ(exit_code_for(f), 0);
}

TEST(DoctorGpu, NvmlMissingSymbolsInform) {
  GpuInventory inv = inventory({good_gpu()});
  inv.nvml_missing_symbols = {"nvmlDeviceGetGpuMaxPcieLinkGeneration"};
  EXPECT_EQ(by_id(run_gpu_checks(inv, two_nodes())).at("gpu.nvml").severity, Severity::info);
}

TEST(DoctorGpu, CudaCompatibility) {
  auto compat = [](int runtime, int driver) {
    GpuInventory inv = inventory({good_gpu()});
    inv.cuda_runtime_version = runtime;
    inv.cuda_driver_version = driver;
    return by_id(run_gpu_checks(inv, two_nodes())).at("gpu.cuda_compat");
  };
  EXPECT_EQ(compat(13000, 13010).severity, Severity::ok);
  EXPECT_EQ(compat(12080, 12040).severity, Severity::warn);  // minor-version compatibility
  const Finding f = compat(13000, 12080);
  EXPECT_EQ(f.severity, Severity::fail);
  EXPECT_NE(f.found.find("runtime 13.0, driver supports 12.8"), std::string::npos) << f.found;
}

TEST(DoctorGpu, Persistence) {
  GpuSnapshot g = good_gpu();
  g.persistence_mode = false;
  EXPECT_EQ(gpu_rule("gpu.persistence", g).severity, Severity::warn);
  g.persistence_mode.reset();
  g.unavailable["persistence_mode"] = "nvmlDeviceGetPersistenceMode: Insufficient Permissions";
  const Finding f = gpu_rule("gpu.persistence", g);
  EXPECT_EQ(f.severity, Severity::na);
  EXPECT_EQ(f.found, "nvmlDeviceGetPersistenceMode: Insufficient Permissions");
}

TEST(DoctorGpu, EccMode) {
  GpuSnapshot g = good_gpu();
  g.ecc_enabled = false;
  g.ecc_pending = false;
  EXPECT_EQ(gpu_rule("gpu.ecc_mode", g).severity, Severity::warn);
  g.ecc_pending = true;
  EXPECT_NE(gpu_rule("gpu.ecc_mode", g).found.find("after the next reset"), std::string::npos);
  g.ecc_enabled.reset();
  g.unavailable["ecc_mode"] = std::string(k_not_supported) + " (nvmlDeviceGetEccMode)";
  EXPECT_EQ(gpu_rule("gpu.ecc_mode", g).severity, Severity::na);
}

TEST(DoctorGpu, EccErrors) {
  GpuSnapshot g = good_gpu();
  g.ecc_volatile_uncorrected = 1;
  EXPECT_EQ(gpu_rule("gpu.ecc_errors", g).severity, Severity::fail);
  g = good_gpu();
  g.ecc_aggregate_uncorrected = 2;
  EXPECT_EQ(gpu_rule("gpu.ecc_errors", g).severity, Severity::warn);
  g = good_gpu();
  g.ecc_volatile_corrected = 5;
  EXPECT_EQ(gpu_rule("gpu.ecc_errors", g).severity, Severity::info);
  g = good_gpu();
  g.ecc_enabled = false;
  EXPECT_EQ(gpu_rule("gpu.ecc_errors", g).severity, Severity::na);
}

TEST(DoctorGpu, Clocks) {
  GpuSnapshot g = good_gpu();
  g.now.sm_clock_mhz = 345;
  g.now.throttle_reasons = throttle::gpu_idle;
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::info);  // idle clocks are normal
  g.now.throttle_reasons = throttle::sw_power_cap;                // a heavy GEMM at the power limit
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::info);
  g.now.throttle_reasons = throttle::sw_thermal;
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::warn);
  g.now.throttle_reasons = 0;  // busy, low, and nothing to explain it
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::warn);
  g.now.throttle_reasons.reset();
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::info);
  g = good_gpu();
  g.now.mem_clock_mhz = 1593;
  EXPECT_EQ(gpu_rule("gpu.clocks", g).severity, Severity::warn);
}

TEST(DoctorGpu, PowerLimit) {
  GpuSnapshot g = good_gpu();
  g.power_limit_w = 500;
  const Finding f = gpu_rule("gpu.power_limit", g);
  EXPECT_EQ(f.severity, Severity::warn);
  EXPECT_NE(f.fix.find("-pl 700"), std::string::npos) << f.fix;
  g.power_limit_w = 750;
  EXPECT_EQ(gpu_rule("gpu.power_limit", g).severity, Severity::info);
}

TEST(DoctorGpu, ThrottleReasons) {
  auto sev = [](std::uint64_t mask) {
    GpuSnapshot g = good_gpu();
    g.now.throttle_reasons = mask;
    return gpu_rule("gpu.throttle", g).severity;
  };
  EXPECT_EQ(sev(throttle::gpu_idle), Severity::ok);
  EXPECT_EQ(sev(throttle::sync_boost), Severity::ok);
  EXPECT_EQ(sev(throttle::hw_slowdown), Severity::fail);
  EXPECT_EQ(sev(throttle::hw_thermal | throttle::sw_power_cap), Severity::fail);
  EXPECT_EQ(sev(throttle::hw_power_brake), Severity::fail);
  EXPECT_EQ(sev(throttle::sw_thermal), Severity::warn);
  EXPECT_EQ(sev(throttle::sw_power_cap), Severity::info);  // under load: expected
  EXPECT_EQ(sev(throttle::sw_power_cap | throttle::gpu_idle),
            Severity::warn);  // at rest: cap too low
  EXPECT_EQ(sev(throttle::applications_clocks), Severity::info);
}

TEST(DoctorGpu, Temperature) {
  GpuSnapshot g = good_gpu();
  g.now.temperature_c = 90;
  EXPECT_EQ(gpu_rule("gpu.temperature", g).severity, Severity::warn);
}

TEST(DoctorGpu, Mig) {
  GpuSnapshot g = good_gpu();
  g.mig_enabled = true;
  g.mig_pending = true;
  EXPECT_EQ(gpu_rule("gpu.mig", g).severity, Severity::warn);
  g.mig_enabled = false;
  EXPECT_NE(gpu_rule("gpu.mig", g).found.find("after the next reset"), std::string::npos);
  g.mig_enabled.reset();
  g.unavailable["mig"] = std::string(k_not_supported) + " (nvmlDeviceGetMigMode)";
  EXPECT_EQ(gpu_rule("gpu.mig", g).severity, Severity::ok);
  g.unavailable["mig"] = "nvmlDeviceGetMigMode: Unknown Error";
  EXPECT_EQ(gpu_rule("gpu.mig", g).severity, Severity::na);
}

TEST(DoctorGpu, PcieGeneration) {
  GpuSnapshot g = good_gpu();
  g.pcie_gen = 1;
  g.now.throttle_reasons = throttle::gpu_idle;
  EXPECT_EQ(gpu_rule("gpu.pcie_gen", g).severity, Severity::info);
  g.now.throttle_reasons = 0;
  EXPECT_EQ(gpu_rule("gpu.pcie_gen", g).severity, Severity::warn);
  g = good_gpu();
  g.pcie_gen = 4;
  g.pcie_gen_max = 4;
  const Finding f = gpu_rule("gpu.pcie_gen", g);
  EXPECT_EQ(f.severity, Severity::warn);
  EXPECT_NE(f.found.find("slot limits"), std::string::npos);
}

TEST(DoctorGpu, PcieWidth) {
  GpuSnapshot g = good_gpu();
  g.pcie_width = 8;
  EXPECT_EQ(gpu_rule("gpu.pcie_width", g).severity, Severity::warn);
}

TEST(DoctorGpu, Nvlink) {
  GpuSnapshot g = good_gpu();
  (*g.nvlink_active)[3] = false;
  EXPECT_EQ(gpu_rule("gpu.nvlink", g).severity, Severity::warn);
  g.nvlink_active = std::vector<bool>{};
  EXPECT_EQ(gpu_rule("gpu.nvlink", g).severity, Severity::info);
  g.nvlink_active = std::vector<bool>(18, false);
  EXPECT_EQ(gpu_rule("gpu.nvlink", g).severity, Severity::info);  // one GPU: nothing to link to
  GpuSnapshot other = g;
  other.index = 1;
  const auto two = by_id(run_gpu_checks(inventory({g, other}), two_nodes()));
  EXPECT_EQ(two.at("gpu.nvlink").severity, Severity::warn);
}

TEST(DoctorGpu, NumaAffinity) {
  const GpuSnapshot g = good_gpu();
  EXPECT_EQ(gpu_rule("gpu.numa_affinity", g, two_nodes({0, 1, 2, 3}, {0, 1})).severity,
            Severity::warn);  // unbound
  EXPECT_EQ(gpu_rule("gpu.numa_affinity", g, two_nodes({0, 1}, {0})).severity,
            Severity::warn);  // bound to the far node
  EXPECT_EQ(gpu_rule("gpu.numa_affinity", g, two_nodes({2, 3}, {0})).severity,
            Severity::warn);  // local CPUs, remote memory
  NumaFacts one;
  one.nodes = {0};
  EXPECT_EQ(gpu_rule("gpu.numa_affinity", g, one).severity, Severity::ok);
  GpuSnapshot unknown = good_gpu();
  unknown.numa_node = -1;
  EXPECT_EQ(gpu_rule("gpu.numa_affinity", unknown).severity, Severity::na);
}

// ---- rendering ----------------------------------------------------------------------------------

std::vector<Finding> sample() {
  auto f = run_gpu_checks(inventory({good_gpu()}), two_nodes());
  f.push_back(rule_cuda_device_max_connections({{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}));
  f.push_back(rule_nccl_other({{"NCCL_SOCKET_IFNAME", "a|b"}}));
  return f;
}

TEST(DoctorRender, JsonCarriesEveryField) {
  const auto j = nlohmann::json::parse(render(sample(), Format::json));
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["summary"]["warn"], 1);
  EXPECT_EQ(j["summary"]["checks"], sample().size());
  EXPECT_EQ(j["exit_code"], 0);
  const auto& first = j["findings"][0];
  for (const char* k :
       {"id", "group", "subject", "section", "source", "found", "recommended", "severity", "fix"}) {
    EXPECT_TRUE(first.contains(k)) << k;
  }
  EXPECT_EQ(first["group"], "gpu");
}

TEST(DoctorRender, TableShowsFixUnderWarnings) {
  const std::string t = render(sample(), Format::table);
  EXPECT_NE(t.find("aisp doctor: "), std::string::npos);
  EXPECT_NE(t.find("fix: unset CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << t;
  EXPECT_NE(t.find("\nGPU\n"), std::string::npos);
  EXPECT_NE(t.find("\nEnvironment\n"), std::string::npos);
}

TEST(DoctorRender, MarkdownEscapesPipes) {
  const std::string md = render(sample(), Format::markdown);
  EXPECT_NE(md.find("NCCL_SOCKET_IFNAME=a\\|b"), std::string::npos) << md;
  EXPECT_NE(md.find("| --- |"), std::string::npos);
}

TEST(DoctorRender, ParsingNames) {
  EXPECT_EQ(format_from_string("json"), Format::json);
  EXPECT_EQ(format_from_string("markdown"), Format::markdown);
  EXPECT_FALSE(format_from_string("xml"));
  EXPECT_EQ(group_from_string("tools"), Group::tools);
  EXPECT_FALSE(group_from_string("network"));
  EXPECT_EQ(to_string(Severity::na), "n/a");
}

}  // namespace
}  // namespace aisp::doctor
