// Host side of `aisp doctor`: readers of /proc and /sys under a root (so tests can point them at
// recorded trees), the host checks that apply the checklist's rules to what they read, and the
// table of host, environment and tool checks. Nothing here shells out: every value comes from a
// file.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/doctor/doctor.hpp"

extern char** environ;

namespace aisp::doctor {

namespace fs = std::filesystem;

HostContext HostContext::from_process() {
  HostContext ctx;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) ctx.env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return ctx;
}

fs::path HostContext::at(std::string_view absolute) const {
  while (!absolute.empty() && absolute.front() == '/') absolute.remove_prefix(1);
  return root / absolute;
}

std::optional<std::string> HostContext::getenv(const std::string& name) const {
  const auto it = env.find(name);
  return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::optional<std::string> read_text(const fs::path& p, std::string* why) {
  // /proc and /sys files report size 0, so read through the stream rather than by file size.
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    if (why) *why = p.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    if (why) *why = p.string() + ": read error";
    return std::nullopt;
  }
  return ss.str();
}

std::optional<std::vector<int>> parse_cpulist(std::string_view s) {
  std::vector<int> out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return out;
  auto number = [](std::string_view t) -> std::optional<int> {
    if (t.empty() || t.size() > 6 ||
        !std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::nullopt;
    return std::stoi(std::string(t));
  };
  while (!s.empty()) {
    const auto comma = s.find(',');
    const std::string_view part = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const auto dash = part.find('-');
    const auto lo = number(part.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : number(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return std::nullopt;
    for (int c = *lo; c <= *hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpulist(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

namespace {

// read_text under ctx.root, with the reason naming the path as it is on the audited system.
std::optional<std::string> read_at(const HostContext& ctx, std::string_view absolute,
                                   std::string* why) {
  const auto text = read_text(ctx.at(absolute), nullptr);
  if (!text && why) *why = std::string(absolute) + ": " + std::strerror(errno);
  return text;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// "Key:   value" lines (/proc/meminfo, /proc/self/status, /proc/cpuinfo): the first value of `key`.
std::optional<std::string> field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && trim(std::string_view(line).substr(0, colon)) == key) {
      return trim(std::string_view(line).substr(colon + 1));
    }
  }
  return std::nullopt;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt::format("{:.{}f} {}", b, b == static_cast<long long>(b) ? 0 : 1, units[u]);
}

std::optional<double> meminfo_kib(const HostContext& ctx, std::string_view key, std::string* why) {
  const auto text = read_at(ctx, "/proc/meminfo", why);
  if (!text) return std::nullopt;
  const auto v = field(*text, key);
  if (!v) {
    if (why) *why = fmt::format("{} not in /proc/meminfo", key);
    return std::nullopt;
  }
  return std::stod(*v);  // "123456 kB"
}

Finding host_base(std::string_view id, std::string_view section, std::string source,
                  std::string_view recommended) {
  Finding f;
  f.id = id;
  f.group = Group::host;
  f.subject = "host";
  f.section = section;
  f.source = std::move(source);
  f.recommended = recommended;
  return f;
}

constexpr std::string_view k_sec_os = "Operating System and Driver Optimizations";
constexpr std::string_view k_sec_data = "Data Processing Pipelines";
constexpr std::string_view k_sec_arch = "System Architecture and Hardware Planning";
constexpr std::string_view k_sec_net = "Distributed Training and Network Optimization";

std::optional<std::string> detect_container(const HostContext& ctx) {
  std::error_code ec;
  if (fs::exists(ctx.at("/.dockerenv"), ec)) return "docker (/.dockerenv)";
  if (fs::exists(ctx.at("/run/.containerenv"), ec)) return "podman (/run/.containerenv)";
  if (const auto cg = read_at(ctx, "/proc/1/cgroup", nullptr)) {
    for (const char* k : {"kubepods", "docker", "containerd", "lxc", "libpod"}) {
      if (cg->find(k) != std::string::npos) return fmt::format("{} (/proc/1/cgroup)", k);
    }
  }
  if (const auto c = ctx.getenv("container")) return fmt::format("{} ($container)", *c);
  return std::nullopt;
}

// ---- host checks --------------------------------------------------------------------------------

Finding check_kernel(const HostContext& ctx) {
  Finding f =
      host_base("host.kernel", k_sec_os, "/proc/sys/kernel/osrelease", "a recent, stable kernel");
  std::string why;
  const auto v = read_at(ctx, "/proc/sys/kernel/osrelease", &why);
  if (!v) return conclude(f, Severity::na, why);
  return conclude(f, Severity::info, trim(*v));
}

Finding check_container(const HostContext& ctx) {
  Finding f =
      host_base("host.container", k_sec_os, "/.dockerenv, /run/.containerenv, /proc/1/cgroup",
                "--ipc=host --ulimit memlock=-1 when containerized");
  if (const auto c = detect_container(ctx)) {
    return conclude(
        f, Severity::info, "inside a container: " + *c,
        "GPU clocks, persistence, ECC and the CPU governor are set on the host, not here");
  }
  return conclude(f, Severity::ok, "no container detected");
}

Finding check_vm(const HostContext& ctx) {
  Finding f =
      host_base("host.vm", k_sec_arch, "/proc/cpuinfo flags, /sys/class/dmi/id, /sys/hypervisor",
                "bare metal, or a VM with GPU passthrough");
  std::vector<std::string> signs;
  if (const auto ci = read_at(ctx, "/proc/cpuinfo", nullptr)) {
    const auto flags = field(*ci, "flags");
    if (flags && (" " + *flags + " ").find(" hypervisor ") != std::string::npos) {
      signs.emplace_back("hypervisor CPU flag");
    }
  }
  std::string dmi;
  for (const char* file : {"sys_vendor", "product_name"}) {
    if (const auto v = read_at(ctx, std::string("/sys/class/dmi/id/") + file, nullptr)) {
      if (!trim(*v).empty()) dmi += (dmi.empty() ? "" : " ") + trim(*v);
    }
  }
  for (const char* vendor : {"QEMU", "KVM", "VMware", "Microsoft", "Xen", "Amazon EC2", "Google",
                             "innotek", "OpenStack", "Bochs", "Parallels"}) {
    if (dmi.find(vendor) != std::string::npos) {
      signs.push_back("DMI: " + dmi);
      break;
    }
  }
  if (const auto h = read_at(ctx, "/sys/hypervisor/type", nullptr); h && !trim(*h).empty()) {
    signs.push_back("hypervisor: " + trim(*h));
  }
  if (signs.empty()) return conclude(f, Severity::ok, dmi.empty() ? "no hypervisor detected" : dmi);
  std::string found = "virtual machine (";
  for (std::size_t i = 0; i < signs.size(); ++i) found += (i ? "; " : "") + signs[i];
  return conclude(f, Severity::info, found + ")",
                  "clocks, governor and NUMA layout may be the hypervisor's; some checks read n/a");
}

Finding check_cpu_model(const HostContext& ctx) {
  Finding f =
      host_base("host.cpu_model", k_sec_arch, "/proc/cpuinfo", "~1 fast core per GPU or more");
  std::string why;
  const auto ci = read_at(ctx, "/proc/cpuinfo", &why);
  if (!ci) return conclude(f, Severity::na, why);
  std::size_t logical = 0;
  for (std::size_t pos = 0; (pos = ci->find("\nprocessor", pos)) != std::string::npos; ++pos)
    ++logical;
  if (ci->starts_with("processor")) ++logical;
  std::string model;
  if (const auto m = field(*ci, "model name")) {
    model = *m;
  } else if (const auto impl = field(*ci, "CPU implementer")) {
    // Arm (Grace) has no "model name": name the implementer and part numbers instead.
    model = fmt::format("Arm implementer {} part {}", *impl, field(*ci, "CPU part").value_or("?"));
  } else {
    model = "unknown model";
  }
  return conclude(f, Severity::info, fmt::format("{} ({} logical CPUs)", model, logical));
}

Finding check_governor(const HostContext& ctx) {
  Finding f = host_base("host.cpu_governor", k_sec_os,
                        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "performance");
  std::map<std::string, int> counts;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ctx.at("/sys/devices/system/cpu"), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 4 || !name.starts_with("cpu") ||
        !std::isdigit(static_cast<unsigned char>(name[3]))) {
      continue;
    }
    if (const auto g = read_text(e.path() / "cpufreq" / "scaling_governor", nullptr)) {
      ++counts[trim(*g)];
    }
  }
  if (ec)
    return conclude(f, Severity::na, fmt::format("/sys/devices/system/cpu: {}", ec.message()));
  if (counts.empty()) {
    return conclude(
        f, Severity::na,
        "no cpufreq interface (cpu*/cpufreq absent): frequency is managed by firmware or "
        "the hypervisor");
  }
  std::string found;
  for (const auto& [gov, n] : counts)
    found += fmt::format("{}{} x{}", found.empty() ? "" : ", ", gov, n);
  if (counts.size() == 1 && counts.begin()->first == "performance")
    return conclude(f, Severity::ok, found);
  return conclude(f, Severity::warn, found, "sudo cpupower frequency-set -g performance");
}

Finding check_smt(const HostContext& ctx) {
  Finding f = host_base("host.smt", k_sec_data, "/sys/devices/system/cpu/smt/control",
                        "off for CPU-bound data pipelines; either for GPU-bound work");
  std::string why;
  const auto v = read_at(ctx, "/sys/devices/system/cpu/smt/control", &why);
  if (!v) return conclude(f, Severity::na, why);
  const std::string s = trim(*v);
  if (s == "on") {
    return conclude(
        f, Severity::info, "on",
        "for CPU-bound data pipelines: echo off | sudo tee /sys/devices/system/cpu/smt/control");
  }
  if (s == "off" || s == "forceoff") return conclude(f, Severity::ok, s);
  if (s == "notsupported" || s == "notimplemented") {
    return conclude(f, Severity::ok, s + " (no SMT on this CPU or hypervisor)");
  }
  return conclude(f, Severity::info, s);
}

Finding check_thp(const HostContext& ctx) {
  Finding f = host_base("host.thp", k_sec_os, "/sys/kernel/mm/transparent_hugepage/enabled",
                        "always or madvise");
  std::string why;
  const auto v = read_at(ctx, "/sys/kernel/mm/transparent_hugepage/enabled", &why);
  if (!v) return conclude(f, Severity::na, why);
  const auto lb = v->find('['), rb = v->find(']');
  if (lb == std::string::npos || rb == std::string::npos || rb < lb) {
    return conclude(f, Severity::na, "unrecognized content: " + trim(*v));
  }
  const std::string mode = v->substr(lb + 1, rb - lb - 1);
  if (mode == "always" || mode == "madvise") return conclude(f, Severity::ok, mode);
  return conclude(f, Severity::warn, mode,
                  "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled");
}

Finding check_swap(const HostContext& ctx) {
  Finding f = host_base("host.swap", k_sec_os, "/proc/meminfo SwapTotal", "off");
  std::string why;
  const auto kib = meminfo_kib(ctx, "SwapTotal", &why);
  if (!kib) return conclude(f, Severity::na, why);
  if (*kib == 0) return conclude(f, Severity::ok, "off");
  return conclude(
      f, Severity::warn, "on, " + human_bytes(*kib * 1024),
      "sudo swapoff -a (and drop swap from /etc/fstab), or pin buffers with cudaHostAlloc");
}

Finding check_swappiness(const HostContext& ctx) {
  Finding f =
      host_base("host.swappiness", k_sec_os, "/proc/sys/vm/swappiness", "<= 10 (or swap off)");
  std::string why;
  const auto v = read_at(ctx, "/proc/sys/vm/swappiness", &why);
  if (!v) return conclude(f, Severity::na, why);
  const std::string s = trim(*v);
  const int n = std::atoi(s.c_str());
  const auto swap = meminfo_kib(ctx, "SwapTotal", nullptr);
  if (swap && *swap == 0) return conclude(f, Severity::ok, s + " (swap is off: no effect)");
  if (n <= 10) return conclude(f, Severity::ok, s);
  return conclude(f, Severity::warn, s, "sudo sysctl vm.swappiness=10 (persist in /etc/sysctl.d)");
}

Finding check_memlock(const HostContext& ctx) {
  Finding f = host_base("host.memlock", k_sec_os, "/proc/self/limits (ulimit -l)", "unlimited");
  std::string why;
  const auto text = read_at(ctx, "/proc/self/limits", &why);
  if (!text) return conclude(f, Severity::na, why);
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("Max locked memory")) continue;
    std::istringstream cols(line.substr(std::strlen("Max locked memory")));
    std::string soft, hard;
    cols >> soft >> hard;
    if (soft == "unlimited") return conclude(f, Severity::ok, "unlimited");
    auto show = [](const std::string& s) {
      return s == "unlimited" ? s : human_bytes(std::stod(s));
    };
    return conclude(
        f, Severity::warn, fmt::format("{} (hard limit {})", show(soft), show(hard)),
        "ulimit -l unlimited (memlock in /etc/security/limits.conf; containers: --ulimit "
        "memlock=-1)");
  }
  return conclude(f, Severity::na, "no \"Max locked memory\" line in /proc/self/limits");
}

Finding check_numa(const HostContext& ctx) {
  Finding f = host_base("host.numa", k_sec_os,
                        "/sys/devices/system/node/online, /proc/self/status Cpus_allowed_list",
                        "process bound to the NUMA node of its GPU");
  const NumaFacts n = read_numa_facts(ctx);
  if (!n.why_not.empty()) return conclude(f, Severity::na, n.why_not);
  if (n.nodes.size() <= 1) return conclude(f, Severity::ok, "1 NUMA node: nothing to bind");
  if (n.process_cpus.empty()) return conclude(f, Severity::na, "Cpus_allowed_list not readable");
  const std::string found =
      fmt::format("{} nodes; process CPUs {} of {}", n.nodes.size(), format_cpulist(n.process_cpus),
                  format_cpulist(n.online_cpus));
  if (n.process_cpus == n.online_cpus) {
    return conclude(
        f, Severity::warn, found + ": not bound",
        "numactl --cpunodebind=<GPU's node> --membind=<GPU's node> (see gpu.numa_affinity)");
  }
  return conclude(f, Severity::ok, found + ": bound");
}

Finding check_shm(const HostContext& ctx) {
  Finding f = host_base("host.shm", k_sec_os, "/proc/self/mounts (/dev/shm size=)", ">= 1 GiB");
  std::string why;
  const auto text = read_at(ctx, "/proc/self/mounts", &why);
  if (!text) return conclude(f, Severity::na, why);
  std::optional<std::string> opts;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream cols(line);
    std::string dev, mnt, type, o;
    cols >> dev >> mnt >> type >> o;
    if (mnt == "/dev/shm") opts = o;  // the last mount wins, as the kernel shows it
  }
  const std::string fix =
      "containers: --ipc=host or --shm-size=16g; hosts: sudo mount -o "
      "remount,size=16G /dev/shm";
  if (!opts) return conclude(f, Severity::warn, "/dev/shm not mounted", fix);
  double bytes = -1;
  const auto mem_kib = meminfo_kib(ctx, "MemTotal", nullptr);
  const auto pos = opts->find("size=");
  if (pos == std::string::npos) {
    if (mem_kib) bytes = *mem_kib * 1024 / 2;  // tmpfs default: half of RAM
  } else {
    const std::string v = opts->substr(pos + 5, opts->find(',', pos) - pos - 5);
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    switch (end && *end ? std::tolower(*end) : 0) {
      case 'k':
        x *= 1024.0;
        break;
      case 'm':
        x *= 1024.0 * 1024;
        break;
      case 'g':
        x *= 1024.0 * 1024 * 1024;
        break;
      case 't':
        x *= 1024.0 * 1024 * 1024 * 1024;
        break;
      case '%':
        x = mem_kib ? *mem_kib * 1024 * x / 100 : -1;
        break;
      default:
        break;
    }
    bytes = x;
  }
  if (bytes < 0)
    return conclude(f, Severity::na, "size of /dev/shm unknown (options: " + *opts + ")");
  if (bytes >= 1024.0 * 1024 * 1024) return conclude(f, Severity::ok, human_bytes(bytes));
  return conclude(f, Severity::warn, human_bytes(bytes) + ": too small for NCCL's SHM transport",
                  fix);
}

Finding check_irqbalance(const HostContext& ctx) {
  Finding f = host_base("host.irqbalance", k_sec_net, "/proc/<pid>/comm",
                        "GPU/NIC interrupts on the local NUMA node");
  bool running = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ctx.at("/proc"), ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() ||
        !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    if (const auto c = read_text(e.path() / "comm", nullptr); c && trim(*c) == "irqbalance") {
      running = true;
      break;
    }
  }
  if (ec) return conclude(f, Severity::na, fmt::format("/proc: {}", ec.message()));
  if (running) {
    return conclude(
        f, Severity::info, "irqbalance running",
        "keep GPU/NIC IRQs local: IRQBALANCE_BANNED_CPULIST, or stop irqbalance and pin "
        "/proc/irq/<n>/smp_affinity_list");
  }
  if (const auto c = detect_container(ctx)) {
    return conclude(f, Severity::na,
                    "host processes are not visible from inside a container (" + *c + ")");
  }
  if (read_numa_facts(ctx).nodes.size() > 1) {
    return conclude(
        f, Severity::info, "irqbalance not running",
        "check that GPU/NIC IRQs are pinned to their local node (/proc/irq/<n>/smp_affinity_list)");
  }
  return conclude(f, Severity::ok, "irqbalance not running (single NUMA node)");
}

// ---- environment and tools: table entries over the rules in doctor_env.cpp ---------------------

template <std::size_t I>
Finding check_nccl(const HostContext& ctx) {
  return rule_nccl_var(ctx.env, nccl_rule_vars()[I]);
}

constexpr std::array<HostCheck, 29> k_checks{{
    {"host.kernel", Group::host, check_kernel},
    {"host.container", Group::host, check_container},
    {"host.vm", Group::host, check_vm},
    {"host.cpu_model", Group::host, check_cpu_model},
    {"host.cpu_governor", Group::host, check_governor},
    {"host.smt", Group::host, check_smt},
    {"host.thp", Group::host, check_thp},
    {"host.swap", Group::host, check_swap},
    {"host.swappiness", Group::host, check_swappiness},
    {"host.memlock", Group::host, check_memlock},
    {"host.numa", Group::host, check_numa},
    {"host.shm", Group::host, check_shm},
    {"host.irqbalance", Group::host, check_irqbalance},
    {"env.cuda_visible_devices", Group::env,
     [](const HostContext& c) { return rule_cuda_visible_devices(c.env); }},
    {"env.cuda_device_max_connections", Group::env,
     [](const HostContext& c) { return rule_cuda_device_max_connections(c.env); }},
    {"env.cuda_launch_blocking", Group::env,
     [](const HostContext& c) { return rule_cuda_launch_blocking(c.env); }},
    {"env.cuda_device_order", Group::env,
     [](const HostContext& c) { return rule_cuda_device_order(c.env); }},
    {"env.nccl_p2p_disable", Group::env, check_nccl<0>},
    {"env.nccl_shm_disable", Group::env, check_nccl<1>},
    {"env.nccl_ib_disable", Group::env, check_nccl<2>},
    {"env.nccl_p2p_level", Group::env, check_nccl<3>},
    {"env.nccl_net_gdr_level", Group::env, check_nccl<4>},
    {"env.nccl_algo", Group::env, check_nccl<5>},
    {"env.nccl_proto", Group::env, check_nccl<6>},
    {"env.nccl_debug", Group::env, check_nccl<7>},
    {"env.nccl_other", Group::env, [](const HostContext& c) { return rule_nccl_other(c.env); }},
    {"tools.ncu", Group::tools,
     [](const HostContext& c) { return rule_tool(find_tool(c, "ncu")); }},
    {"tools.nsys", Group::tools,
     [](const HostContext& c) { return rule_tool(find_tool(c, "nsys")); }},
    {"tools.compute_sanitizer", Group::tools,
     [](const HostContext& c) { return rule_tool(find_tool(c, "compute-sanitizer")); }},
}};

}  // namespace

NumaFacts read_numa_facts(const HostContext& ctx) {
  NumaFacts n;
  std::string why;
  const auto list = [&](std::string_view path) -> std::vector<int> {
    const auto t = read_at(ctx, path, nullptr);
    return t ? parse_cpulist(*t).value_or(std::vector<int>{}) : std::vector<int>{};
  };
  if (const auto online = read_at(ctx, "/sys/devices/system/node/online", &why)) {
    n.nodes = parse_cpulist(*online).value_or(std::vector<int>{});
  } else {
    // Kernels built without NUMA have no node directory: that is one node, not an error.
    std::error_code ec;
    if (fs::exists(ctx.at("/sys/devices/system"), ec))
      n.nodes = {0};
    else
      n.why_not = why;
  }
  for (int node : n.nodes) {
    n.node_cpus[node] = list(fmt::format("/sys/devices/system/node/node{}/cpulist", node));
  }
  n.online_cpus = list("/sys/devices/system/cpu/online");
  if (const auto st = read_at(ctx, "/proc/self/status", nullptr)) {
    n.process_cpus =
        parse_cpulist(field(*st, "Cpus_allowed_list").value_or("")).value_or(std::vector<int>{});
    n.process_mems =
        parse_cpulist(field(*st, "Mems_allowed_list").value_or("")).value_or(std::vector<int>{});
  }
  return n;
}

std::optional<int> read_pci_numa_node(const HostContext& ctx, std::string_view bus_id,
                                      std::string* why) {
  const auto t =
      read_at(ctx, "/sys/bus/pci/devices/" + normalize_pci_bus_id(bus_id) + "/numa_node", why);
  if (!t) return std::nullopt;
  return std::atoi(trim(*t).c_str());
}

std::span<const HostCheck> host_checks() { return k_checks; }

std::vector<Finding> run_host_checks(const HostContext& ctx, const std::set<Group>& groups) {
  std::vector<Finding> out;
  for (const auto& c : k_checks) {
    if (!groups.contains(c.group)) continue;
    try {
      out.push_back(c.run(ctx));
    } catch (const std::exception& e) {
      // A reader surprised by the file it found must not take the whole report down.
      Finding f;
      f.id = c.id;
      f.group = c.group;
      f.subject = to_string(c.group);
      f.severity = Severity::na;
      f.found = std::string("check failed: ") + e.what();
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace aisp::doctor
