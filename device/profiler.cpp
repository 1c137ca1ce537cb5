// The parent side of `aisp profile` (device/profiler.hpp): one ncu process per variant, then the export of
// its report to CSV, parsed and combined by core/profile/profile.cpp. Processes are started with posix_spawn (no
// shell: nothing in a path or a variant name is ever interpreted) in aisp's own process group, so that a
// Ctrl-C reaches ncu and its worker too; on a timeout ncu is killed and the worker follows it (it asks for
// SIGKILL when its parent dies, device/profile_pass.cpp).
#include "device/profiler.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include "core/results/run_folder.hpp"
#include "core/base/error.hpp"
#include "device/device_info.hpp"
#include "device/ladder.hpp"
#include "device/orchestrator.hpp"

extern char** environ;

namespace aisp {
namespace fs = std::filesystem;
using namespace profile;

namespace {

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

struct ProcessEnd {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string describe() const {
    if (timed_out) return "timed out";
    if (signal) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    return fmt::format("exit status {}", exit_code);
  }
};

// Runs argv with stdin from /dev/null, stdout to `out_path` and stderr to `err_path` (may be the same file),
// waiting at most timeout_s; then it is killed.
ProcessEnd run_process(const std::vector<std::string>& args, const std::string& out_path,
                       const std::string& err_path, double timeout_s) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (err_path == out_path) {
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(rc)));
  ProcessEnd end;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      end.timed_out = true;
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
  return end;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text_atomically(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, p);
}

std::string ncu_version(const std::string& ncu, const fs::path& scratch) {
  const fs::path out = scratch / "ncu_version.txt";
  const auto end = run_process({ncu, "--version"}, out.string(), out.string(), 60);
  std::string version;
  std::istringstream in(read_text(out));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Version", 0) == 0) version = line;
  }
  fs::remove(out);
  return end.exit_code == 0 ? version : "";
}

struct Plan {
  const TargetInfo* target;
  std::vector<const VariantInfo*> variants;
  AxisValues axes;
};

std::vector<Plan> make_plans(const ProfileOptions& o) {
  static const auto catalogue = LadderRegistry::instance().catalogue();
  const Selection sel = select(catalogue, o.selectors, o.include_hidden);
  std::vector<Plan> plans;
  std::set<std::string> used;
  for (const auto& item : sel.items) {
    std::vector<std::pair<std::string, std::int64_t>> mine;
    for (const auto& ov : o.axis_overrides) {
      for (const auto& a : item.target->axes) {
        if (a.name == ov.first) {
          mine.push_back(ov);
          used.insert(ov.first);
        }
      }
    }
    plans.push_back({item.target, item.variants, resolve_axes(item.target->axes, mine, item.target->name())});
  }
  for (const auto& ov : o.axis_overrides) {
    if (!used.count(ov.first))
      throw UsageError(fmt::format("axis '{}' is not an axis of the selected targets", ov.first));
  }
  return plans;
}

// The harness's first validation seed: the profiled launch sees the inputs `bench run` validated first.
constexpr std::uint64_t k_profile_seed = 0x243F6A88ULL;

struct VariantJob {
  const Plan* plan;
  const VariantInfo* variant;
  fs::path dir;      // the target's folder
  fs::path out_dir;  // the profile folder (paths in profile.json are relative to it)
};

// Profiles one variant; fills the target's declared bytes and L2 size from the worker's report.
VariantProfileData profile_variant(const VariantJob& job, const ProfileOptions& o, const std::string& self,
                                   TargetProfileData& t) {
  VariantProfileData v;
  v.name = job.plan->target->variant_name(*job.variant);
  const std::string stem = job.variant->file_stem();
  const fs::path base = job.dir / stem;
  const fs::path report = base.string() + ".ncu-rep", log = base.string() + ".ncu.log",
                 csv = base.string() + ".raw.csv", config = base.string() + ".config.json",
                 result = base.string() + ".result.json";
  const auto rel = [&](const fs::path& p) { return fs::relative(p, job.out_dir).string(); };
  for (const auto& p : {report, csv, result}) fs::remove(p);
  nlohmann::json cfg{{"target", job.plan->target->name()},
                     {"variant", stem},
                     {"axes", job.plan->axes},
                     {"device", o.device},
                     {"seed", k_profile_seed},
                     {"warmup_launches", o.warmup_launches},
                     {"range", nvtx_range_name(v.name)},
                     {"result", result.string()}};
  write_text_atomically(config, cfg.dump(2) + "\n");

  CaptureRequest req;
  req.ncu = o.ncu;
  req.set = o.set;
  req.replay = o.replay;
  req.lock_clocks_to_base = o.lock_clocks_to_base;
  req.flush_caches = job.plan->target->default_mode == CacheMode::cold;
  req.report = report.string();
  req.app = {self, "__profile-worker", "--config", config.string()};
  v.command = capture_command(req);
  v.log = rel(log);
  const ProcessEnd end = run_process(v.command, log.string(), log.string(), o.timeout_s);
  const std::string log_text = read_text(log);
  const std::string cause = diagnose_ncu_output(log_text);
  if (end.timed_out) {
    v.reason = fmt::format("ncu ran past the {:.0f} s timeout (see {})", o.timeout_s, v.log);
    return v;
  }
  nlohmann::json worker;
  if (fs::exists(result)) worker = nlohmann::json::parse(read_text(result), nullptr, false);
  const std::string status = worker.is_object() ? worker.value("status", "") : "";
  if (worker.is_object() && worker.contains("bytes_per_launch")) {
    t.bytes_per_launch = worker.value("bytes_per_launch", 0.0);
    t.l2_bytes = worker.value("l2_bytes", 0.0);
  }
  if (status == "skipped") {
    v.status = Status::skipped;
    v.reason = worker.value("reason", "");
    return v;
  }
  if (status != "launched") {
    const std::string why = status.empty() ? "" : worker.value("reason", "");
    v.reason = !cause.empty() ? cause
               : !why.empty()
                   ? why
                   : fmt::format("the worker under ncu did not report ({}; see {})", end.describe(), v.log);
    return v;
  }
  if (!fs::exists(report)) {
    if (!cause.empty()) {
      v.reason = cause;  // ERR_NVGPUCTRPERM also ends with "No kernels were profiled": the cause comes first
    } else if (no_kernels_profiled(log_text)) {
      v.status = Status::no_kernels;
      // A cudaMemcpyAsync runs on a copy engine: kernel and application replay see no kernel. (Range
      // replay of such a launch was refused by ncu 2025.3 with "RecordStatusEmpty", so no hint to use it.)
      v.reason =
          "the launch ran no kernel (copy-engine or other non-kernel work, which ncu does not profile)";
    } else {
      v.reason = fmt::format("ncu wrote no report ({}; see {})", end.describe(), v.log);
    }
    return v;
  }
  if (!cause.empty()) {
    v.reason = cause;
    return v;
  }
  v.report = rel(report);
  const fs::path export_err = base.string() + ".export.log";
  const ProcessEnd ex =
      run_process(export_command(o.ncu, report.string()), csv.string(), export_err.string(), o.timeout_s);
  if (ex.exit_code != 0) {
    const std::string why = diagnose_ncu_output(read_text(export_err));
    v.reason =
        fmt::format("exporting the report failed ({}){}", ex.describe(), why.empty() ? "" : ": " + why);
    return v;
  }
  fs::remove(export_err);
  v.csv = rel(csv);
  try {
    v.kernels = parse_raw_csv(read_text(csv));
  } catch (const DataError& e) {
    v.reason = e.what();
    return v;
  }
  if (v.kernels.empty()) {
    v.status = Status::no_kernels;
    v.reason = "the report holds no kernel";
    return v;
  }
  v.launch = combine_launch(v.kernels);
  v.bytes = check_bytes(v.launch, t.bytes_per_launch, t.l2_bytes);
  v.status = Status::profiled;
  if (o.source_top > 0) {
    // The Source page: a second export of the same report. Its failure leaves the profile standing.
    const fs::path source_csv = base.string() + ".source.csv";
    const fs::path source_err = base.string() + ".source.log";
    const ProcessEnd se = run_process(source_export_command(o.ncu, report.string()), source_csv.string(),
                                      source_err.string(), o.timeout_s);
    if (se.exit_code != 0) {
      const std::string why = diagnose_ncu_output(read_text(source_err));
      v.source_error = fmt::format("exporting the source page failed ({}){}", se.describe(),
                                   why.empty() ? "" : ": " + why);
      return v;
    }
    fs::remove(source_err);
    v.source_csv = rel(source_csv);
    try {
      v.source = summarize_source_page(read_text(source_csv), o.source_top);
    } catch (const DataError& e) {
      v.source_error = e.what();
    }
  }
  return v;
}

}  // namespace

std::string find_ncu(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (!is_executable_file(explicit_path)) {
      throw ProfilerMissing(fmt::format("--ncu {}: not an executable file", explicit_path));
    }
    return fs::absolute(explicit_path).string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');) {
      if (!d.empty() && is_executable_file(fs::path(d) / "ncu")) {
        return fs::absolute(fs::path(d) / "ncu").string();
      }
    }
  }
  if (is_executable_file("/usr/local/cuda/bin/ncu")) return "/usr/local/cuda/bin/ncu";
  throw ProfilerMissing(
      "Nsight Compute (ncu) not found on PATH or in /usr/local/cuda/bin; install it with the "
      "CUDA toolkit or pass --ncu PATH");
}

ProfileOutcome run_profiles(const ProfileOptions& opts, std::ostream& progress) {
  ProfileOptions o = opts;
  const auto plans = make_plans(o);
  o.ncu = find_ncu(o.ncu);
  ProfileOutcome outcome;
  if (o.out_dir.empty()) {
    std::string label;
    for (const auto& s : o.selectors) label += (label.empty() ? "" : "+") + s;
    o.out_dir =
        (fs::path("artifacts/profiles") / (utc_now("%Y%m%dT%H%M%SZ") + "_" + sanitize_label(label))).string();
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec || access(o.out_dir.c_str(), W_OK) != 0) {
    throw UsageError(
        fmt::format("cannot write to the output folder {}{}", o.out_dir, ec ? ": " + ec.message() : ""));
  }
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw NoDeviceError(why);
  if (o.device < 0 || o.device >= count) {
    throw UsageError(fmt::format("--device {} does not exist: {} device(s) visible", o.device, count));
  }
  // Absolute: the worker under ncu finds its config and result files whatever its working directory.
  o.out_dir = fs::absolute(o.out_dir).lexically_normal().string();
  outcome.out_dir = o.out_dir;
  auto& data = outcome.data;
  data.set = o.set;
  data.replay = o.replay;
  data.clock_control = o.lock_clocks_to_base ? "base" : "none";
  data.ncu = o.ncu;
  data.ncu_version = ncu_version(o.ncu, o.out_dir);
  data.device = query_device(o.device).name;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  progress << fmt::format("aisp profile: {} with {} ({}), set {}, {} replay, clocks {}; reports in {}\n",
                          data.device, o.ncu, data.ncu_version.empty() ? "version unknown" : data.ncu_version,
                          to_string(o.set), to_string(o.replay),
                          o.lock_clocks_to_base ? "locked to base" : "as found", o.out_dir)
           << std::flush;
  for (const auto& plan : plans) {
    TargetProfileData t;
    t.name = plan.target->name();
    t.axes = recorded_axes(plan.target->axes, plan.axes);  // as bench run records the point
    t.mode = plan.target->default_mode;
    const fs::path dir = fs::path(o.out_dir) / sanitize_label(t.name);
    fs::create_directories(dir);
    for (const auto* variant : plan.variants) {
      const std::string name = plan.target->variant_name(*variant);
      VariantProfileData v;
      if (!outcome.machine_wide_error.empty()) {
        v.name = name;
        v.reason = outcome.machine_wide_error;
      } else {
        progress << fmt::format("[{}] profile {}\n", t.name, variant->file_stem()) << std::flush;
        const auto start = std::chrono::steady_clock::now();
        v = profile_variant({&plan, variant, dir, o.out_dir}, o, self, t);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress << fmt::format("[{}] {} {} ({:.1f} s){}\n", t.name, to_string(v.status),
                                variant->file_stem(), took, v.reason.empty() ? "" : ": " + v.reason)
                 << std::flush;
        if (v.status == Status::failed && is_machine_wide(v.reason)) outcome.machine_wide_error = v.reason;
      }
      if (v.status == Status::failed) ++outcome.failed;
      t.variants.push_back(std::move(v));
    }
    data.targets.push_back(std::move(t));
    // Rewritten after each target, so an interrupted run keeps what it profiled.
    write_text_atomically(fs::path(o.out_dir) / "profile.json", to_json(data).dump(2) + "\n");
  }
  return outcome;
}

ProfileOutcome profile_after_bench(RunOutcome& run_outcome, const RunOptions& run, MetricSet set,
                                   const std::string& ncu, std::ostream& progress) {
  ProfileOutcome all;
  const fs::path root = fs::path(run_outcome.run_dir) / "profile";
  all.out_dir = root.string();
  // One profiling pass per measured point, at that point's axes: a sweep's points each get their own
  // folder (profile/<target>_<axes>/), an unswept target keeps profile/ as before.
  for (auto& t : run_outcome.results.targets) {
    ProfileOptions o;
    for (const auto& v : t.variants) {
      if (v.verdict == Verdict::pass || v.verdict == Verdict::noisy) o.selectors.push_back(v.name);
    }
    if (o.selectors.empty()) continue;
    const bool swept = std::count_if(run_outcome.results.targets.begin(), run_outcome.results.targets.end(),
                                     [&](const TargetResult& x) { return x.name == t.name; }) > 1;
    for (const auto& [k, value] : t.axes) o.axis_overrides.push_back({k, value});
    o.include_hidden = run.include_hidden;
    o.device = run.device;
    o.set = set;
    o.ncu = ncu;
    const std::string sub = swept ? sanitize_label(t.name + "_" + format_axes(t.axes, "_")) : "";
    o.out_dir = (sub.empty() ? root : root / sub).string();
    const std::string prefix = sub.empty() ? "profile/" : "profile/" + sub + "/";
    ProfileOutcome p = run_profiles(o, progress);
    for (auto& v : t.variants) {
      for (const auto& pt : p.data.targets) {
        for (const auto& pv : pt.variants) {
          if (pv.name != v.name) continue;
          v.profile = summarize(pv, set);
          if (!v.profile->report.empty()) v.profile->report = prefix + v.profile->report;
          v.profile->json = prefix + "profile.json";
        }
      }
    }
    all.failed += p.failed;
    if (all.machine_wide_error.empty()) all.machine_wide_error = p.machine_wide_error;
    if (all.data.targets.empty()) {
      all.data = std::move(p.data);
    } else {
      for (auto& pt : p.data.targets) all.data.targets.push_back(std::move(pt));
    }
    // A machine-wide failure (no counter access) would fail every later point the same way.
    if (!all.machine_wide_error.empty()) break;
  }
  if (all.data.targets.empty()) {
    progress << "aisp: no variant passed, nothing to profile\n";
    return all;
  }
  write_text_atomically(fs::path(run_outcome.run_dir) / "results.json",
                        to_json(run_outcome.results).dump(2) + "\n");
  return all;
}

}  // namespace aisp
