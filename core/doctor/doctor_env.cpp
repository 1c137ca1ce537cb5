// Environment and tools of `aisp doctor`: the rules for CUDA and NCCL environment variables (pure:
// a map in, a finding out) and the search for the profilers (ncu, nsys, compute-sanitizer) with
// their versions. A version is read from the files next to the tool (its versioned install
// directory, the toolkit's version.json) and only as a last resort from `tool --version`.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/doctor/doctor.hpp"

namespace aisp::doctor {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_sec_multi = "Multi-GPU Scaling and Interconnect Optimizations";
constexpr std::string_view k_sec_net = "Distributed Training and Network Optimization";
constexpr std::string_view k_sec_prof = "Performance Profiling, Debugging, and Monitoring";
constexpr std::string_view k_sec_bench = "Effective Benchmarking Playbook";

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// ---- environment --------------------------------------------------------------------------------

Finding env_base(std::string_view var, std::string_view section, std::string_view recommended) {
  Finding f;
  f.id = "env." + std::string(var);
  std::transform(f.id.begin(), f.id.end(), f.id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  f.group = Group::env;
  f.subject = var;
  f.section = section;
  f.source = "$" + std::string(var);
  f.recommended = recommended;
  return f;
}

const std::string* lookup(const EnvMap& env, std::string_view var) {
  const auto it = env.find(std::string(var));
  return it == env.end() ? nullptr : &it->second;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

struct NcclRule {
  std::string_view var;
  std::string_view recommended;
  bool (*bad)(const std::string& upper_value);
  Severity bad_severity;
  std::string_view why_bad;
  std::string_view fix;
};

bool is_one(const std::string& v) { return v == "1" || v == "TRUE" || v == "YES"; }
bool is_loc(const std::string& v) { return v == "LOC" || v == "0"; }
bool always(const std::string&) { return true; }
bool is_trace(const std::string& v) { return v == "TRACE"; }

constexpr std::array<NcclRule, 8> k_nccl_rules{{
    {"NCCL_P2P_DISABLE", "unset", is_one, Severity::warn,
     "GPU peer-to-peer (NVLink/PCIe P2P) off: traffic is staged through host memory",
     "unset NCCL_P2P_DISABLE"},
    {"NCCL_SHM_DISABLE", "unset", is_one, Severity::warn,
     "shared-memory transport off: intra-node traffic falls back to the network",
     "unset NCCL_SHM_DISABLE"},
    {"NCCL_IB_DISABLE", "unset", is_one, Severity::warn,
     "InfiniBand/RoCE off: inter-node traffic goes over TCP sockets", "unset NCCL_IB_DISABLE"},
    {"NCCL_P2P_LEVEL", "unset (NCCL picks by topology)", is_loc, Severity::warn,
     "P2P allowed only within one GPU: peer-to-peer effectively off", "unset NCCL_P2P_LEVEL"},
    {"NCCL_NET_GDR_LEVEL", "unset (NCCL picks by topology)", is_loc, Severity::warn,
     "GPUDirect RDMA effectively off: NIC traffic is staged through host memory",
     "unset NCCL_NET_GDR_LEVEL"},
    {"NCCL_ALGO", "unset (NCCL's tuner chooses)", always, Severity::info,
     "forces the collective algorithm, overriding NCCL's tuner",
     "unset unless a measurement on this fabric shows it helps"},
    {"NCCL_PROTO", "unset (NCCL's tuner chooses)", always, Severity::info,
     "forces the protocol, overriding NCCL's tuner",
     "unset unless a measurement on this fabric shows it helps"},
    {"NCCL_DEBUG", "unset or WARN", is_trace, Severity::warn,
     "TRACE logging slows every collective", "export NCCL_DEBUG=WARN (or INFO to debug)"},
}};

// ---- tools --------------------------------------------------------------------------------------

// "nsight-compute-2025.3.1", "nsight-compute/2025.3.1": toolkit (.run) and package installs put the
// version in the directory name, so a path that resolves into one names the version.
std::optional<std::string> version_in_path(const std::string& path) {
  static const std::regex re(
      R"((?:nsight-compute|nsight-systems)[-/]([0-9]{4}\.[0-9]+(?:\.[0-9]+)*))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(path, m, re)) return m[1].str();
  return std::nullopt;
}

bool version_less(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  for (std::string p, q;;) {
    const bool more_a = static_cast<bool>(std::getline(x, p, '.'));
    const bool more_b = static_cast<bool>(std::getline(y, q, '.'));
    if (!more_a || !more_b) return !more_a && more_b;
    if (std::atol(p.c_str()) != std::atol(q.c_str()))
      return std::atol(p.c_str()) < std::atol(q.c_str());
  }
}

// The toolkit's bin/ncu and bin/nsys are generic shell wrappers that run the newest of
// <toolkit>/nsight-compute-<version>/ and /opt/nvidia/nsight-compute/<version>/ (their text only
// mentions example versions). Pick the newest the same way, so the version is the one that runs.
std::optional<std::string> version_from_install_dirs(const HostContext& ctx,
                                                     const fs::path& toolkit, std::string_view tool,
                                                     std::string* source) {
  if (tool != "ncu" && tool != "nsys") return std::nullopt;
  const std::string product = tool == "ncu" ? "nsight-compute" : "nsight-systems";
  std::optional<std::string> best;
  const auto consider = [&](const fs::path& dir, const std::string& version) {
    if (version.empty() || version.find_first_not_of("0123456789.") != std::string::npos) return;
    if (!best || version_less(*best, version)) {
      best = version;
      *source = dir.string();
    }
  };
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(toolkit, ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with(product + "-")) consider(e.path(), n.substr(product.size() + 1));
  }
  for (const auto& e : fs::directory_iterator(ctx.at("/opt/nvidia/" + product), ec)) {
    consider(e.path(), e.path().filename().string());
  }
  return best;
}

// The toolkit's version.json (next to bin/) lists each component's version.
std::optional<std::string> version_from_json(const fs::path& dir, std::string_view tool,
                                             std::string* source) {
  const char* key = tool == "ncu"    ? "nsight_compute"
                    : tool == "nsys" ? "nsight_systems"
                                     : "cuda_sanitizer_api";
  fs::path d = dir;
  for (int up = 0; up < 3 && !d.empty(); ++up, d = d.parent_path()) {
    const auto text = read_text(d / "version.json", nullptr);
    if (!text) continue;
    const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains(key) && j[key].is_object() && j[key].contains("version") &&
        j[key]["version"].is_string()) {
      *source = (d / "version.json").string();
      return j[key]["version"].get<std::string>();
    }
    if (d == d.parent_path()) break;
  }
  return std::nullopt;
}

// Last resort: `tool --version`, with a deadline so a wedged tool cannot hang the report.
std::optional<std::string> version_from_exec(const fs::path& exe) {
  // Everything the child needs is prepared before fork(): NVML or CUDA may have started threads,
  // and a forked child of a threaded process may only call async-signal-safe functions (no malloc).
  const std::string path = exe.string();
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execl(path.c_str(), path.c_str(), "--version", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  kill(pid, SIGKILL);  // harmless if it already exited; we reap it either way
  waitpid(pid, nullptr, 0);
  static const std::regex re(R"([Vv]ersion\s+V?([0-9]+(?:\.[0-9]+)+))");
  std::smatch m;
  if (std::regex_search(out, m, re)) return m[1].str();
  return std::nullopt;
}

}  // namespace

// ---- public: environment rules ------------------------------------------------------------------

Finding rule_cuda_visible_devices(const EnvMap& env) {
  Finding f = env_base("CUDA_VISIBLE_DEVICES", k_sec_multi, "unset, or the GPUs you mean to test");
  const std::string* v = lookup(env, "CUDA_VISIBLE_DEVICES");
  if (!v) return conclude(f, Severity::ok, "unset (every GPU visible)");
  if (v->empty() || *v == "-1" || upper(*v) == "NODEVFILES") {
    return conclude(f, Severity::warn, "\"" + *v + "\": hides every GPU from CUDA",
                    "unset CUDA_VISIBLE_DEVICES or list the GPUs to use");
  }
  return conclude(f, Severity::info, *v + " (CUDA renumbers these from 0)");
}

Finding rule_cuda_device_max_connections(const EnvMap& env) {
  Finding f = env_base("CUDA_DEVICE_MAX_CONNECTIONS", k_sec_bench, "unset (8 hardware queues)");
  const std::string* v = lookup(env, "CUDA_DEVICE_MAX_CONNECTIONS");
  if (!v) return conclude(f, Severity::ok, "unset (8 hardware queues)");
  int n = 0;
  const bool numeric = !v->empty() && std::all_of(v->begin(), v->end(), [](unsigned char c) {
    return std::isdigit(c);
  }) && v->size() < 4;
  if (numeric) n = std::stoi(*v);
  if (!numeric || n < 1 || n > 32) {
    return conclude(f, Severity::warn, *v + ": not a count from 1 to 32", "unset it or use 1..32");
  }
  if (n == 1) {
    return conclude(f, Severity::warn,
                    "1: every stream shares one hardware queue, so independent streams serialize",
                    "unset CUDA_DEVICE_MAX_CONNECTIONS (multi-stream ladders need several queues)");
  }
  return conclude(f, Severity::info, *v);
}

Finding rule_cuda_launch_blocking(const EnvMap& env) {
  Finding f = env_base("CUDA_LAUNCH_BLOCKING", k_sec_bench, "unset or 0");
  const std::string* v = lookup(env, "CUDA_LAUNCH_BLOCKING");
  if (!v) return conclude(f, Severity::ok, "unset");
  if (*v == "0" || v->empty()) return conclude(f, Severity::ok, *v);
  // Every launch then waits for its kernel: overlap disappears and launch-overhead timings are
  // false.
  return conclude(f, Severity::fail,
                  *v + ": every kernel launch is synchronous; timings are not valid",
                  "unset CUDA_LAUNCH_BLOCKING (a debugging aid only)");
}

Finding rule_cuda_device_order(const EnvMap& env) {
  Finding f = env_base("CUDA_DEVICE_ORDER", k_sec_multi, "PCI_BUS_ID");
  const std::string* v = lookup(env, "CUDA_DEVICE_ORDER");
  if (v && upper(*v) == "PCI_BUS_ID") return conclude(f, Severity::ok, *v);
  return conclude(f, Severity::info,
                  (v ? *v : std::string("unset")) +
                      " (FASTEST_FIRST): CUDA ordinals may differ from nvidia-smi and NVML indices",
                  "export CUDA_DEVICE_ORDER=PCI_BUS_ID so GPU numbers agree everywhere");
}

std::span<const std::string_view> nccl_rule_vars() {
  static const auto vars = [] {
    std::array<std::string_view, k_nccl_rules.size()> out{};
    for (std::size_t i = 0; i < k_nccl_rules.size(); ++i) out[i] = k_nccl_rules[i].var;
    return out;
  }();
  return vars;
}

Finding rule_nccl_var(const EnvMap& env, std::string_view var) {
  const auto it = std::find_if(k_nccl_rules.begin(), k_nccl_rules.end(),
                               [&](const NcclRule& r) { return r.var == var; });
  if (it == k_nccl_rules.end()) {
    Finding f = env_base(var, k_sec_net, "");
    return conclude(f, Severity::na, "no rule for " + std::string(var));
  }
  Finding f = env_base(var, k_sec_net, it->recommended);
  const std::string* v = lookup(env, var);
  if (!v) return conclude(f, Severity::ok, "unset");
  if (it->bad(upper(*v))) {
    return conclude(f, it->bad_severity, *v + ": " + std::string(it->why_bad),
                    std::string(it->fix));
  }
  return conclude(f, Severity::ok, *v);
}

Finding rule_nccl_other(const EnvMap& env) {
  Finding f = env_base("NCCL_*", k_sec_net, "only variables a measurement justified");
  f.id = "env.nccl_other";
  std::vector<std::string> set;
  for (const auto& [k, v] : env) {
    // NCCL_VERSION is image metadata (NVIDIA's containers set it), not a setting.
    if (!k.starts_with("NCCL_") || k == "NCCL_VERSION") continue;
    if (std::find(nccl_rule_vars().begin(), nccl_rule_vars().end(), k) != nccl_rule_vars().end()) {
      continue;
    }
    set.push_back(k + "=" + v);
  }
  if (set.empty()) return conclude(f, Severity::ok, "no other NCCL_* set");
  return conclude(f, Severity::info, join(set, " "),
                  "keep only NCCL settings that a measurement on this fabric justified");
}

Finding rule_tool(const ToolInfo& t) {
  Finding f;
  f.id = "tools." + t.name;
  std::replace(f.id.begin(), f.id.end(), '-', '_');
  f.group = Group::tools;
  f.subject = t.name;
  f.section = k_sec_prof;
  f.source =
      "PATH, /usr/local/cuda/bin; version from " +
      (t.version_source.empty() ? std::string("version.json or --version") : t.version_source);
  f.recommended = "installed, matching the CUDA toolkit";
  if (!t.path) {
    f.source = "searched " + t.searched;
    return conclude(
        f, Severity::warn, "not found in PATH or /usr/local/cuda/bin",
        "install the CUDA toolkit component providing " + t.name + " or add its directory to PATH");
  }
  if (!t.version) {
    return conclude(f, Severity::info, t.path->string() + " (version unknown)");
  }
  return conclude(f, Severity::ok, *t.version + " (" + t.path->string() + ")");
}

ToolInfo find_tool(const HostContext& ctx, std::string_view name) {
  ToolInfo t;
  t.name = name;
  std::vector<std::string> dirs;
  const std::string path_env = ctx.getenv("PATH").value_or("");
  for (std::size_t b = 0; b <= path_env.size();) {
    const auto e = std::min(path_env.find(':', b), path_env.size());
    if (e > b && path_env[b] == '/') dirs.push_back(path_env.substr(b, e - b));
    b = e + 1;
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const auto v = ctx.getenv(var); v && v->starts_with("/")) dirs.push_back(*v + "/bin");
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  std::vector<std::string> unique;
  for (const auto& d : dirs) {
    if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(d);
  }
  for (const auto& d : unique) t.searched += (t.searched.empty() ? "" : ":") + d;
  // Paths as they are on the audited system: without the fixture root that tests put in front.
  const auto shown = [&](const fs::path& p) {
    const std::string r = ctx.root.string(), s = p.string();
    return r != "/" && s.starts_with(r)
               ? "/" + fs::path(s.substr(r.size())).relative_path().string()
               : s;
  };

  for (const auto& d : unique) {
    const fs::path candidate = ctx.at(d) / name;
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec) || access(candidate.c_str(), X_OK) != 0) continue;
    t.path = fs::path(d) / name;  // as seen on the audited system, without the fixture root
    const fs::path real = fs::weakly_canonical(candidate, ec);
    if (auto v = version_in_path(real.string())) {
      t.version = v;
      t.version_source = "install path " + shown(real);
      return t;
    }
    std::string src;
    if (auto v =
            version_from_install_dirs(ctx, candidate.parent_path().parent_path(), name, &src)) {
      t.version = v;
      t.version_source = "install directory " + shown(src);
      return t;
    }
    for (const fs::path& dir : {real.parent_path(), candidate.parent_path()}) {
      if (auto v = version_from_json(dir, name, &src)) {
        t.version = v;
        t.version_source = shown(src);
        return t;
      }
    }
    if (ctx.allow_exec) {
      t.version = version_from_exec(candidate);
      t.version_source = t.path->string() + " --version";
    }
    return t;
  }
  return t;
}

}  // namespace aisp::doctor
