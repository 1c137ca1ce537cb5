#include "device/orchestrator.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aisp_build_info.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <ostream>
#include <thread>
#include <set>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "core/base/error.hpp"
#include "core/doctor/doctor.hpp"
#include "core/base/hardware_key.hpp"
#include "core/base/thread_dump.hpp"
#include "core/measure/progress.hpp"
#include "core/results/roofline.hpp"
#include "core/results/run_folder.hpp"
#include "device/device_info.hpp"
#include "device/harness.hpp"
#include "device/ladder.hpp"
#include "device/nvml.hpp"
#include "device/probes.hpp"

extern char** environ;

namespace aisp {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

struct Plan {
  const TargetInfo* target;
  std::vector<const VariantInfo*> variants;
  AxisValues axes;
  CacheMode mode;
  bool swept = false;  // the target runs at more than one axis point in this run
  // "ch07:copy", or "ch07:copy n=1024" for one point of a sweep: the progress lines' and the log's name,
  // with the point's axes as its result records them.
  std::string display() const {
    const std::string point = swept ? format_axes(recorded_axes(target->axes, axes), " ") : "";
    return point.empty() ? target->name() : target->name() + " " + point;
  }
};

std::vector<Plan> make_plans(const RunOptions& o, const std::vector<TargetInfo>& catalogue) {
  const Selection sel = select(catalogue, o.selectors, o.include_hidden);
  std::vector<AxisRequest> requests;
  for (const auto& [name, value] : o.axis_overrides) requests.push_back({name, {value}});
  for (const auto& r : o.axis_sweeps) requests.push_back(r);
  std::vector<Plan> plans;
  std::set<std::string> used;
  for (const auto& item : sel.items) {
    std::vector<AxisRequest> mine;
    for (const auto& r : requests) {
      const bool has = std::any_of(item.target->axes.begin(), item.target->axes.end(),
                                   [&](const AxisSpec& a) { return a.name == r.first; });
      if (has) {
        mine.push_back(r);
        used.insert(r.first);
      }
    }
    const auto points = expand_axis_points(item.target->axes, mine, item.target->name());
    for (const auto& point : points) {
      plans.push_back({item.target, item.variants, point, o.mode.value_or(item.target->default_mode),
                       points.size() > 1});
    }
  }
  for (const auto& r : requests) {
    if (used.count(r.first)) continue;
    std::string known;
    for (const auto& p : plans) {
      for (const auto& a : p.target->axes) known += (known.empty() ? "" : ", ") + p.target->name() + " " + a.name;
    }
    throw UsageError(fmt::format("axis '{}' is not an axis of the selected targets (axes: {})", r.first,
                                 known.empty() ? "none" : known));
  }
  return plans;
}

// One worker process: config on its stdin, messages on fd 3, stdout and stderr to a log file.
class Worker {
 public:
  Worker(const ojson& config, const std::string& log_path) {
    int in_pipe[2], msg_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(msg_pipe, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, msg_pipe[1], 3);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::vector<std::string> args{self, "__worker", "--fd", "3"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&m_pid, self.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in_pipe[0]);
    close(msg_pipe[1]);
    m_fd = msg_pipe[0];
    if (rc != 0) {
      close(in_pipe[1]);
      throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    }
    const std::string text = config.dump() + "\n";
    const ssize_t written = write(in_pipe[1], text.data(), text.size());
    close(in_pipe[1]);
    if (written != static_cast<ssize_t>(text.size())) throw std::runtime_error("cannot send the worker its config");
  }
  ~Worker() {
    if (m_fd >= 0) close(m_fd);
    if (m_pid > 0) {
      kill(m_pid, SIGKILL);
      waitpid(m_pid, nullptr, 0);
    }
  }

  // Next message; nullopt at end of stream; throws on timeout.
  enum class Read { message, eof, timeout };
  Read next(double timeout_s, std::string& line) {
    while (true) {
      const auto nl = m_buffer.find('\n');
      if (nl != std::string::npos) {
        line = m_buffer.substr(0, nl);
        m_buffer.erase(0, nl + 1);
        return Read::message;
      }
      pollfd p{m_fd, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (ready == 0) return Read::timeout;
      if (ready < 0 && errno == EINTR) continue;
      char buf[65536];
      const ssize_t n = read(m_fd, buf, sizeof buf);
      if (n <= 0) return Read::eof;
      m_buffer.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Asks a silent worker for every thread's stack (core/base/thread_dump.hpp) and gives it a moment to
  // write them to its log before it is killed: what it hung in, for whoever reads the log.
  void request_thread_dump() {
    if (m_pid <= 0 || kill(m_pid, SIGUSR2) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }

  // Waits for the process; returns a description of how it ended ("exit 0", "signal SIGSEGV").
  std::string reap(bool force) {
    if (force) kill(m_pid, SIGKILL);
    int status = 0;
    waitpid(m_pid, &status, 0);
    m_pid = -1;
    if (WIFEXITED(status)) {
      m_exit = WEXITSTATUS(status);
      return fmt::format("exit status {}", m_exit);
    }
    if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return "ended abnormally";
  }
  int exit_code() const { return m_exit; }

 private:
  pid_t m_pid = -1;
  int m_fd = -1;
  int m_exit = -1;
  std::string m_buffer;
};

std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

void write_json_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

// The doctor's findings that bear on timing (docs/doctor.md): a stored result says what state the
// machine was in. Never fatal: a finding that cannot be read says why.
ojson machine_state() {
  static const std::set<std::string> k_timing_ids{
      "host.cpu_governor", "host.smt", "host.thp", "host.vm", "host.numa", "gpu.clocks", "gpu.throttle",
      "gpu.power_limit", "gpu.persistence", "gpu.ecc_mode", "gpu.temperature", "gpu.pcie_gen", "gpu.pcie_width"};
  namespace dr = aisp::doctor;
  ojson out = ojson::array();
  try {
    const dr::HostContext ctx = dr::HostContext::from_process();
    std::vector<dr::Finding> findings = dr::run_host_checks(ctx, {dr::Group::host});
    for (auto& f : dr::run_gpu_checks(read_gpu_inventory("/"), dr::read_numa_facts(ctx))) {
      findings.push_back(std::move(f));
    }
    for (const auto& f : findings) {
      if (!k_timing_ids.count(f.id)) continue;
      out.push_back({{"id", f.id}, {"subject", f.subject}, {"severity", dr::to_string(f.severity)}, {"found", f.found}});
    }
  } catch (const std::exception& e) {
    out.push_back({{"id", "doctor"}, {"severity", "n/a"}, {"found", std::string("not read: ") + e.what()}});
  }
  return out;
}

ojson manifest(const RunOptions& o, const DeviceFacts& d, const std::string& run_id,
               const std::vector<Plan>& plans) {
  ojson targets = ojson::array();
  for (const auto& p : plans) {
    ojson vs = ojson::array();
    for (const auto* v : p.variants) vs.push_back(p.target->variant_name(*v));
    targets.push_back({{"target", p.target->name()}, {"axes", p.axes}, {"mode", to_string(p.mode)},
                       {"l2_flush", to_string(o.l2_flush)}, {"clock", to_string(p.target->clock)},
                       {"max_time_s", sampling_budget_s(o, *p.target)},
                       {"variants", vs}});
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {{"schema", "aisp.manifest"},
          {"schema_version", 1},
          {"run_id", run_id},
          {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
          {"hardware_key", hardware_key(d.name, d.device_count)},
          {"device", to_json(d)},
          {"host", {{"hostname", host}, {"cpu_model", cpu_model()}}},
          {"machine_state", machine_state()},
          {"build",
           {{"git_sha", build_info::git_sha},
            {"git_dirty", build_info::git_dirty},
            {"build_type", build_info::build_type},
            {"cxx_compiler", build_info::cxx_compiler},
            {"cuda_compiler", build_info::cuda_compiler},
            {"cuda_architectures", build_info::cuda_architectures},
            {"device_flags", build_info::device_flags}}},
          {"argv", o.argv},
          {"config",
           {{"device", o.device},
            {"warmup_launches", o.warmup_launches},
            {"min_samples", o.rule.min_samples},
            {"min_time_s", o.rule.min_time_s},
            {"max_time_s", o.rule.max_time_s},
            {"target_rel_ci", o.rule.target_rel_ci},
            {"noisy_rel_ci", o.rule.noisy_rel_ci},
            {"timeout_s", o.timeout_s},
            {"audit", o.audit},
            {"audit_timed", o.audit_timed},
            {"mask_references", o.mask_references},
            {"fresh_inputs", o.fresh_inputs},
            {"clocks_policy", "as found (aisp never changes clocks)"},
            {"targets", targets}}}};
}

class RunWriter {
 public:
  RunWriter(fs::path dir) : m_dir(std::move(dir)), m_events(m_dir / "events.jsonl") {
    if (!m_events) throw UsageError("cannot write to the output folder " + m_dir.string());
    m_start = std::chrono::steady_clock::now();
  }
  void event(const std::string& target, ojson e, const AxisValues* axes = nullptr) {
    e["t"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    e["target"] = target;
    if (axes) e["axes"] = *axes;
    m_events << e.dump() << "\n";
    m_events.flush();
  }
  const fs::path& dir() const { return m_dir; }

 private:
  fs::path m_dir;
  std::ofstream m_events;
  std::chrono::steady_clock::time_point m_start;
};

// Runs one target to completion, restarting workers after crashes until every variant has a verdict.
TargetResult run_plan(const Plan& plan, const RunOptions& o, RunWriter& writer, std::ostream& progress,
                      const RunCeilings* ceilings) {
  TargetResult t;
  t.name = plan.target->name();
  t.summary = plan.target->summary;
  t.clock = plan.target->clock;
  t.mode = plan.mode;
  t.l2_flush = o.l2_flush;
  // What is recorded leaves out an omit_at_default axis at its default (core/base/axes.hpp); the worker
  // below still gets every axis (hc.axes).
  t.axes = recorded_axes(plan.target->axes, plan.axes);
  t.key_axes = key_axis_names(plan.target->axes);
  for (const auto* v : plan.variants) {
    if (v->kind == VariantKind::baseline && t.baseline.empty()) t.baseline = plan.target->variant_name(*v);
    if (v->kind == VariantKind::vendor && t.vendor.empty()) t.vendor = plan.target->variant_name(*v);
  }
  std::map<std::string, VariantResult> done;
  // Each point of a sweep is its own pass with its own log; an unswept target keeps the plain name.
  const std::string shown = plan.display();
  const std::string log_path = (writer.dir() / (sanitize_label(plan.swept ? shown : t.name) + ".log")).string();
  const double budget_s = sampling_budget_s(o, *plan.target);
  if (budget_s > o.rule.max_time_s) {
    progress << fmt::format("[{}] sampling budget {:g} s per variant: the ladder's (--max-time sets another)\n",
                            shown, budget_s)
             << std::flush;
  }
  for (std::size_t attempt = 0; attempt <= plan.variants.size() && done.size() < plan.variants.size(); ++attempt) {
    HarnessConfig hc;
    hc.target = t.name;
    for (const auto* v : plan.variants) {
      if (!done.count(plan.target->variant_name(*v))) hc.variants.push_back(v->file_stem());
    }
    hc.axes = plan.axes;
    hc.mode = plan.mode;
    hc.l2_flush = o.l2_flush;
    hc.device = o.device;
    hc.warmup_launches = o.warmup_launches;
    hc.rule = o.rule;
    hc.rule.max_time_s = budget_s;
    hc.audit = o.audit;
    hc.audit_timed = o.audit_timed;
    hc.mask_references = o.mask_references;
    hc.fresh_inputs = o.fresh_inputs;
    Worker worker(to_json(hc), log_path);
    std::string current;  // the variant the worker last said it was working on
    std::string line, cause;
    std::string last_phase;
    std::string sample_in_progress;  // ", in a timed sample of N launches ...": said if the worker falls silent
    while (true) {
      const auto r = worker.next(o.timeout_s, line);
      if (r == Worker::Read::timeout) {
        worker.request_thread_dump();
        cause = fmt::format("timeout: no progress for {:.0f} s{} (every thread's stack is in {})", o.timeout_s,
                            sample_in_progress, log_path);
        break;
      }
      if (r == Worker::Read::eof) break;
      ojson msg;
      try {
        msg = ojson::parse(line);
      } catch (const std::exception&) {
        continue;  // not ours; the protocol fd carries only JSON lines
      }
      const std::string type = msg.value("type", "");
      if (type == "phase") {
        current = msg.value("variant", "");
        const std::string ph = msg.value("phase", "");
        const bool audited = msg.value("audit", false);  // an audited launch at a timed round: not a sample
        sample_in_progress.clear();
        if (audited) {
          sample_in_progress = ", in an audited launch at a timed round";
        } else if (ph == "time" && msg.contains("batch")) {
          sample_in_progress = timed_sample_text(msg.value("batch", 1), msg.value("launch_s", 0.0));
        }
        if (o.on_progress && !audited) o.on_progress({shown, current, ph, ""});
        if (ph != "time" || last_phase != "time") {
          writer.event(t.name, msg, &t.axes);
          progress << fmt::format("[{}] {} {}\n", shown, ph, current) << std::flush;
        }
        last_phase = ph;
      } else if (type == "target") {
        writer.event(t.name, msg, &t.axes);
        t.bytes_per_launch = msg.value("bytes_per_launch", 0.0);
        t.flops_per_launch = msg.value("flops_per_launch", 0.0);
        t.bytes_read_per_launch = msg.value("bytes_read_per_launch", 0.0);
        t.bytes_written_per_launch = msg.value("bytes_written_per_launch", 0.0);
        t.flop_dtype = msg.value("flop_dtype", "");
        t.memory_ceiling = msg.value("memory_ceiling", "");
        t.noise_floor_ms = msg.value("noise_floor_ms", 0.0);
      } else if (type == "variant") {
        writer.event(t.name, msg, &t.axes);
        VariantResult v;
        try {
          v = variant_result_from_json(msg.at("result"));
        } catch (const std::exception& e) {
          // A message we cannot read costs that variant, never the run.
          v.name = msg.at("result").value("name", current);
          v.verdict = Verdict::error;
          v.reason = std::string("unreadable result from the worker: ") + e.what();
        }
        if (o.on_progress) o.on_progress({shown, v.name, "done", std::string(to_string(v.verdict))});
        progress << fmt::format("[{}] {} {}{}\n", shown, to_string(v.verdict), v.name,
                                v.reason.empty() ? "" : ": " + v.reason)
                 << std::flush;
        done[v.name] = std::move(v);
        current.clear();
      } else if (type == "fatal") {
        writer.event(t.name, msg, &t.axes);
        cause = msg.value("message", "worker failed");
      }
    }
    const std::string ended = worker.reap(!cause.empty());
    if (done.size() == plan.variants.size()) break;
    // A worker that lost its CUDA context has already reported the variant that lost it: start a fresh
    // worker for the rest without blaming anyone else.
    if (cause.empty() && current.empty() && worker.exit_code() == k_worker_exit_sticky_error) continue;
    if (cause.empty()) {
      cause = "worker " + ended;
      const std::string last = last_log_line(log_path);
      if (!last.empty()) cause += "; last log line: " + last;
    }
    // The variant in progress takes the blame; with none in progress the whole remainder does.
    std::vector<std::string> blamed;
    if (!current.empty() && !done.count(current)) {
      blamed.push_back(current);
    } else {
      for (const auto* v : plan.variants) {
        if (!done.count(plan.target->variant_name(*v))) blamed.push_back(plan.target->variant_name(*v));
      }
    }
    for (const auto& name : blamed) {
      VariantResult v;
      for (const auto* info : plan.variants) {
        if (plan.target->variant_name(*info) != name) continue;
        v.name = name;
        v.step = info->step;
        v.slug = info->slug;
        v.kind = info->kind;
        v.summary = info->summary;
        v.precision = info->precision;
      }
      v.verdict = Verdict::error;
      v.reason = cause;
      writer.event(t.name, {{"type", "variant"}, {"result", to_json(v)}}, &t.axes);
      if (o.on_progress) o.on_progress({shown, name, "done", "ERROR"});
      progress << fmt::format("[{}] ERROR {}: {}\n", shown, name, cause) << std::flush;
      done[name] = std::move(v);
    }
  }
  for (const auto* v : plan.variants) t.variants.push_back(done.at(plan.target->variant_name(*v)));
  derive_statistics(t, t.noise_floor_ms);
  // Placement against this GPU's ceilings and the physics check (docs/ceilings.md), in the parent.
  if (ceilings) {
    for (const auto& name : apply_ceilings(t, *ceilings)) {
      for (const auto& v : t.variants) {
        if (v.name != name) continue;
        writer.event(t.name, {{"type", "physics"}, {"variant", name}, {"verdict", "IMPLAUSIBLE"}, {"reason", v.reason}},
                     &t.axes);
        progress << fmt::format("[{}] IMPLAUSIBLE {}: {}\n", shown, name, v.reason) << std::flush;
      }
    }
  }
  for (auto& v : t.variants) {
    if (v.stats && t.noise_floor_ms > 0 && v.stats->median < 10 * t.noise_floor_ms) {
      v.notes.push_back(fmt::format("median under 10x the timer's noise floor ({:.2f} us): its comparisons are "
                                    "not called significant",
                                    t.noise_floor_ms * 1e3));
    }
  }
  return t;
}

}  // namespace

void check_selection(const RunOptions& options) {
  make_plans(options, LadderRegistry::instance().catalogue());
}

RunOutcome run_benchmarks(const RunOptions& o, std::ostream& progress) {
  const auto catalogue = LadderRegistry::instance().catalogue();
  const auto plans = make_plans(o, catalogue);
  // An unusable output folder is bad input: say so before looking for a GPU.
  std::error_code ec;
  fs::create_directories(o.out_root, ec);
  if (ec || access(o.out_root.c_str(), W_OK) != 0) {
    throw UsageError(fmt::format("cannot write to the output folder {}{}", o.out_root,
                                 ec ? ": " + ec.message() : ": permission denied"));
  }
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw NoDeviceError(why);
  if (o.device < 0 || o.device >= count) {
    throw UsageError(fmt::format("--device {} does not exist: {} device(s) visible", o.device, count));
  }
  const DeviceFacts device = query_device(o.device);

  std::string label = o.label;
  if (label.empty()) {
    for (const auto& s : o.selectors) label += (label.empty() ? "" : "+") + s;
  }
  const std::string run_id = utc_now("%Y%m%dT%H%M%SZ") + "_" + sanitize_label(label);
  fs::path dir = fs::path(o.out_root) / run_id;
  for (int i = 2; fs::exists(dir, ec); ++i) dir = fs::path(o.out_root) / fmt::format("{}-{}", run_id, i);
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("cannot create the output folder {}: {}", dir.string(), ec.message()));

  RunOutcome outcome;
  outcome.run_dir = dir.string();
  outcome.results.run_id = dir.filename().string();
  outcome.results.created_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  outcome.results.hardware_key = hardware_key(device.name, device.device_count);
  write_json_atomically(dir / "manifest.json", manifest(o, device, outcome.results.run_id, plans).dump(2) + "\n");

  RunWriter writer(dir);
  progress << fmt::format("aisp: {} ({}), run folder {}\n", device.name, outcome.results.hardware_key,
                          dir.string());
  if (o.ceilings) {
    // Before any target: measuring missing ceilings runs its own worker, never beside a timed one.
    outcome.results.ceilings =
        obtain_run_ceilings(device, o.peaks_dir, (dir / "peaks.log").string(), o.peaks_timeout_s, progress);
    if (!outcome.results.ceilings->problem.empty()) {
      progress << "[peaks] no % of ceiling and no physics check in this run: " << outcome.results.ceilings->problem
               << "\n";
    }
  }
  for (const auto& plan : plans) {
    outcome.results.targets.push_back(
        run_plan(plan, o, writer, progress, outcome.results.ceilings ? &*outcome.results.ceilings : nullptr));
    // Rewritten after each target, so an interrupted run keeps what it measured.
    write_json_atomically(dir / "results.json", to_json(outcome.results).dump(2) + "\n");
  }
  return outcome;
}

int worker_main(int fd) {
  FILE* out = fdopen(fd, "w");
  if (!out) return 70;
  // The parent sends SIGUSR2 before it kills a worker silent past --timeout: the stacks go to the log.
  (void)install_thread_dump(SIGUSR2);
  const Emit emit = [out](const ojson& msg) {
    const std::string text = msg.dump() + "\n";
    std::fwrite(text.data(), 1, text.size(), out);
    std::fflush(out);
  };
  try {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const HarnessConfig config = harness_config_from_json(nlohmann::json::parse(text));
    return run_target(config, emit);
  } catch (const std::exception& e) {
    emit({{"type", "fatal"}, {"message", e.what()}});
    return 1;
  }
}

}  // namespace aisp
