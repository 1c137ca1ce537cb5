// `aisp hw peaks` plumbing: the probe context and timing rule, the dispatch to the probe families, the
// cache, and the worker that `bench run` starts when the cache lacks what placement needs.
#include "device/probes.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <aisp_build_info.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <ostream>
#include <thread>

#include "core/base/error.hpp"
#include "core/base/hardware_key.hpp"
#include "core/base/instrumentation.hpp"
#include "core/measure/stats.hpp"
#include "core/measure/stopping.hpp"
#include "device/cuda_check.hpp"
#include "device/device_info.hpp"
#include "device/nvml.hpp"
#include "device/probes_internal.hpp"

extern char** environ;

namespace aisp {

namespace probe {

Context::Context(int device) : m_device(device) {
  AISP_CUDA_CHECK(cudaSetDevice(device));
  m_facts = query_device(device);
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
}

Context::~Context() {
  m_cold.reset();
  m_hot.reset();
  if (m_stream) {
    cudaSetDevice(m_device);
    cudaStreamDestroy(m_stream);
  }
}

void Context::make_current() const { AISP_CUDA_CHECK(cudaSetDevice(m_device)); }

SampleTimer& Context::cold() {
  make_current();
  if (!m_cold) m_cold = std::make_unique<SampleTimer>(m_facts, m_stream, ClockKind::gpu, CacheMode::cold);
  return *m_cold;
}

SampleTimer& Context::hot() {
  make_current();
  if (!m_hot) m_hot = std::make_unique<SampleTimer>(m_facts, m_stream, ClockKind::gpu, CacheMode::hot);
  return *m_hot;
}

Timing run_steps(SampleTimer& timer, cudaStream_t stream, const Steps& s, std::string_view what) {
  const auto checked_launch = [&](bool timed, std::vector<double>* samples) {
    if (s.prepare) s.prepare();
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (timed) {
      const auto t = timer.time(s.launch, s.batch, s.blocking);
      if (samples && !t.blocking_timed_out) samples->push_back(t.seconds / s.batch);
    } else {
      s.launch();
    }
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::string wrong = s.check ? s.check() : std::string();
    if (!wrong.empty()) throw ProbeError(fmt::format("{}: output is wrong: {}", what, wrong));
  };
  checked_launch(false, nullptr);
  // Warm-up: module loading, lazy library set-up and clock ramp stay out of the samples.
  for (int i = 0; i < 3; ++i) timer.time(s.launch, s.batch, s.blocking);
  // The harness's stopping rule, with a probe's smaller budget.
  StoppingRule rule;
  rule.min_samples = 10;
  rule.min_time_s = 0.05;
  rule.max_time_s = 1.5;
  std::vector<double> samples;
  double measured = 0;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const auto t = timer.time(s.launch, s.batch, s.blocking);
    if (t.blocking_timed_out) throw ProbeError(fmt::format("{}: the blocking kernel timed out", what));
    samples.push_back(t.seconds / s.batch);
    measured += t.seconds;
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (evaluate_stop(rule, samples, measured, spent) != StopState::keep_sampling) break;
  }
  checked_launch(true, &samples);  // the last sample's output is checked too
  return {stats::median(samples), samples.size()};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string gib(double bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.3g} GiB", bytes / double(1ull << 30));
  return fmt::format("{:.3g} MiB", bytes / double(1ull << 20));
}

CeilingEntry entry(std::string name, std::string group, std::string_view unit, double value, std::string method,
                   std::size_t samples) {
  CeilingEntry c;
  c.name = std::move(name);
  c.group = std::move(group);
  c.unit = std::string(unit);
  c.value = value;
  c.method = std::move(method);
  c.samples = samples;
  c.measured_utc = utc_now();
  return c;
}

CeilingEntry skipped_entry(std::string name, std::string group, std::string_view unit, std::string why) {
  CeilingEntry c = entry(std::move(name), std::move(group), unit, 0, "", 0);
  c.skipped = std::move(why);
  return c;
}

bool wants(const std::vector<std::string>& wanted, std::string_view name) {
  return std::find(wanted.begin(), wanted.end(), name) != wanted.end();
}

void record(ProbeResults& out, const std::string& name, const std::function<CeilingEntry()>& body) {
  try {
    out.entries.push_back(body());
  } catch (const std::exception& e) {
    out.errors.emplace_back(name, e.what());
  }
}

}  // namespace probe

std::string peaks_driver_version() {
  std::string why;
  if (auto nvml = Nvml::load(&why)) {
    if (auto v = nvml->driver_version()) return *v;
  }
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) v = 0;
  return fmt::format("cuda-{}", v);
}

std::string peaks_cache_file(const std::string& dir, const DeviceFacts& d) {
  return peaks_cache_path(dir, d.uuid, peaks_driver_version());
}

ProbeResults run_probes(int device, const std::vector<std::string>& names,
                        const std::function<void(const std::string&)>& progress) {
  using namespace probe;
  ProbeResults out;
  const std::pair<const char*, Family> families[] = {
      {"dram", probe_dram},       {"l2", probe_l2},     {"smem", probe_smem}, {"compute", probe_compute},
      {"tensor", probe_tensor},   {"host", probe_host}, {"disk", probe_disk}, {"p2p", probe_p2p},
      {"launch", probe_launch}};
  int count = 0;
  AISP_CUDA_CHECK(cudaGetDeviceCount(&count));
  Context ctx(device);
  for (const auto& [group, family] : families) {
    const auto owned = expected_ceilings({group}, device, count);
    std::vector<std::string> wanted;
    for (const auto& n : names) {
      if (wants(owned, n)) wanted.push_back(n);
    }
    if (wanted.empty()) continue;
    if (progress) progress(fmt::format("measuring {} ({})", group, fmt::join(wanted, ", ")));
    try {
      ctx.make_current();
      family(ctx, wanted, out);
    } catch (const std::exception& e) {
      // Whatever the family had not recorded yet carries the error that stopped it.
      for (const auto& n : wanted) {
        const bool done = std::any_of(out.entries.begin(), out.entries.end(), [&](auto& c) { return c.name == n; }) ||
                          std::any_of(out.errors.begin(), out.errors.end(), [&](auto& p) { return p.first == n; });
        if (!done) out.errors.emplace_back(n, e.what());
      }
    }
  }
  return out;
}

namespace {

// The GPU's clocks, temperature and clock-event reasons right after the last probe, for the cache's
// provenance: a set measured while the GPU throttled says so. nullopt without NVML.
std::optional<GpuTelemetry> gpu_state_now(const DeviceFacts& facts) {
  std::string why;
  const auto nvml = Nvml::load(&why);
  if (!nvml) return std::nullopt;
  const auto index = nvml->index_of_pci_bus_id(facts.pci_bus_id);
  if (!index) return std::nullopt;
  return nvml->telemetry(*index);
}

// Names carried over without a tool check: every entry of a version-1 cache, or what the previous
// provenance still lists; minus what this pass measured again.
std::vector<std::string> still_unconfirmed(const std::optional<CeilingSet>& loaded,
                                           const std::vector<std::string>& measured_now) {
  std::vector<std::string> out;
  if (!loaded) return out;
  if (loaded->provenance) {
    out = loaded->provenance->unconfirmed;
  } else {
    for (const auto& e : loaded->entries) out.push_back(e.name);
  }
  std::erase_if(out, [&](const std::string& n) {
    return std::find(measured_now.begin(), measured_now.end(), n) != measured_now.end();
  });
  return out;
}

}  // namespace

PeaksOutcome measure_peaks(const PeaksOptions& o) {
  // First, before any CUDA call: under a tool nothing is measured, so nothing can be cached.
  if (const auto tool = detect_instrumentation(process_environment())) {
    throw MeasurementRefused(instrumentation_refusal(*tool));
  }
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw std::runtime_error("no CUDA device: " + why);
  if (o.device < 0 || o.device >= count) {
    throw UsageError(fmt::format("--device {} does not exist: {} device(s) visible", o.device, count));
  }
  const DeviceFacts facts = query_device(o.device);
  const auto names = expected_ceilings(o.groups.empty() ? ceiling_groups() : o.groups, o.device, count);
  const std::string driver = peaks_driver_version();
  PeaksOutcome out;
  out.path = peaks_cache_path(o.dir, facts.uuid, driver);
  const CacheLoad load = load_ceiling_cache(out.path, facts.uuid, driver);
  out.cache_note = "measured now (no cache yet)";
  if (load.status == CacheLoad::Status::ok) {
    out.set = *load.set;
    out.cache_note = "reused";
  } else if (load.status == CacheLoad::Status::corrupt) {
    const std::string aside = quarantine_ceiling_cache(out.path);
    out.cache_note = fmt::format("the cache was corrupt ({}); {}; measured again", load.problem,
                                 aside.empty() ? "it could not be moved aside" : "moved aside to " + aside);
  }
  out.set.gpu_name = facts.name;
  out.set.gpu_uuid = facts.uuid;
  out.set.driver_version = driver;
  out.set.hardware_key = gpu_model_slug(facts.name);
  out.set.cc = facts.cc();
  out.set.sm_count = facts.sm_count;
  out.set.l2_bytes = facts.l2_bytes;
  std::vector<std::string> todo;
  for (const auto& n : names) {
    if (o.refresh || !out.set.find(n)) todo.push_back(n);
  }
  if (todo.empty()) return out;
  if (load.status == CacheLoad::Status::ok) out.cache_note = o.refresh ? "refreshed" : "completed";
  ProbeResults r = run_probes(o.device, todo, o.progress);
  const auto state = gpu_state_now(facts);
  // Looked up again: the decision is made in the process that measured, at the moment it measured.
  CacheDecision d = decide_cacheable(out.set, r.entries, detect_instrumentation(process_environment()));
  for (auto& e : d.keep) {
    out.measured.push_back(e.name);
    out.set.upsert(std::move(e));
  }
  out.errors = std::move(r.errors);
  for (const auto& [name, reason] : d.refused) {
    if (o.progress) o.progress(fmt::format("refused {}: {}", name, reason));
    out.errors.emplace_back(name, reason);
  }
  // Written when the pass produced anything, refusals included: they tell `bench run` why a ceiling
  // it asked for is still missing. What was refused is absent, so the next pass measures it again.
  if (!out.measured.empty() || !d.refused.empty()) {
    CeilingProvenance p;
    p.git_dirty = build_info::git_dirty;
    p.build_type = build_info::build_type;
    p.written_utc = probe::utc_now();
    p.tool_free = true;
    p.tools_checked = std::string(instrumentation_checked());
    p.datasheet_rule = fmt::format("every DRAM, FMA and tensor value is at least {:.0f}% of the GPU's datasheet "
                                   "value (where the model is known)",
                                   100 * k_min_datasheet_fraction);
    p.gpu_state = state;
    p.refused = d.refused;
    p.unconfirmed = still_unconfirmed(load.set, out.measured);
    out.set.provenance = std::move(p);
    out.set.aisp_git_sha = build_info::git_sha;
    save_ceiling_cache(out.path, out.set);
    if (o.progress) {
      o.progress(fmt::format("cached {} value(s) in {} ({} refused, not cached)", out.measured.size(), out.path,
                             d.refused.size()));
    }
  }
  return out;
}

namespace {

// Runs `args` with stdout and stderr appended to `log_path`; waits up to timeout_s. Returns "" on exit
// status 0, else how it ended.
std::string run_and_wait(const std::vector<std::string>& args, const std::string& log_path, double timeout_s) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return fmt::format("cannot start {}: {}", args[0], std::strerror(rc));
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return "lost the probe worker";
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return fmt::format("the probe worker ran past {:.0f} s and was stopped", timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status)) return fmt::format("the probe worker exited with status {}", WEXITSTATUS(status));
  return fmt::format("the probe worker was killed by signal {}", WTERMSIG(status));
}

// Why the cache will not do for a bench run as it is, in a few words.
std::string cache_shortfall(const CacheLoad& load, const std::vector<std::string>& missing) {
  if (load.status == CacheLoad::Status::missing) return "no ceilings cached for this GPU";
  if (load.status == CacheLoad::Status::corrupt) return "the ceilings cache is corrupt (" + load.problem + ")";
  return fmt::format("the ceilings cache lacks {}", fmt::join(missing, ", "));
}

// The values of `names` that a pass written at or after `started` refused and left missing.
std::vector<std::pair<std::string, std::string>> fresh_refusals(const CacheLoad& load,
                                                                const std::vector<std::string>& names,
                                                                const std::string& started) {
  std::vector<std::pair<std::string, std::string>> out;
  if (load.status != CacheLoad::Status::ok || !load.set->provenance || load.set->provenance->written_utc < started) {
    return out;
  }
  for (const auto& [name, reason] : load.set->provenance->refused) {
    if (std::find(names.begin(), names.end(), name) != names.end() && !load.set->find(name)) {
      out.emplace_back(name, reason);
    }
  }
  return out;
}

}  // namespace

RunCeilings obtain_run_ceilings(const DeviceFacts& d, const std::string& dir, const std::string& log_path,
                                double timeout_s, std::ostream& progress) {
  RunCeilings rc;
  try {
    const std::string driver = peaks_driver_version();
    rc.source = peaks_cache_path(dir, d.uuid, driver);
    const auto groups = placement_groups();
    const auto names = expected_ceilings(groups, d.index, d.device_count);
    CacheLoad load = load_ceiling_cache(rc.source, d.uuid, driver);
    std::vector<std::string> missing;
    for (const auto& n : names) {
      if (!load.set || !load.set->find(n)) missing.push_back(n);
    }
    // Under a tool the cache is only read: what a tool-free pass cached is still right, but nothing is
    // measured here (the worker would inherit the tool) and nothing is written.
    const auto tool = detect_instrumentation(process_environment());
    if (load.status != CacheLoad::Status::ok || !missing.empty()) {
      const std::string why = cache_shortfall(load, missing);
      if (tool) {
        const std::string refusal = instrumentation_refusal(*tool);
        if (load.status != CacheLoad::Status::ok) {
          progress << fmt::format("[peaks] {}; {}: nothing measured, nothing cached\n", why, refusal) << std::flush;
          rc.problem = load.status == CacheLoad::Status::missing ? refusal : fmt::format("{}; {}", refusal, why);
          return rc;
        }
        progress << fmt::format("[peaks] {}; {}: placing against the cached ceilings as they are, nothing measured "
                                "or cached\n",
                                why, refusal)
                 << std::flush;
      } else {
        progress << fmt::format("[peaks] {}: measuring them (aisp hw peaks; log {})\n", why, log_path) << std::flush;
        const std::string started = probe::utc_now();
        const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
        const std::string ended =
            run_and_wait({self, "__worker", "--peaks", "--device", std::to_string(d.index), "--peaks-dir", dir,
                          "--only", fmt::format("{}", fmt::join(groups, ","))},
                         log_path, timeout_s);
        if (!ended.empty()) progress << "[peaks] " << ended << "\n" << std::flush;
        load = load_ceiling_cache(rc.source, d.uuid, driver);
        // A value this run asked for that the worker just refused as implausible: the pass that produced
        // it is not one to place results against, so the run has no ceilings and says why.
        if (const auto refused = fresh_refusals(load, names, started); !refused.empty()) {
          rc.problem = "ceilings refused: " + refusal_summary(refused);
          progress << "[peaks] " << rc.problem << "\n" << std::flush;
          return rc;
        }
      }
    } else if (tool) {
      progress << fmt::format("[peaks] under {} ({}): placing against the cached ceilings as they are, nothing "
                              "measured or cached\n",
                              tool->tool, tool->evidence)
               << std::flush;
    }
    if (load.status != CacheLoad::Status::ok) {
      rc.problem = load.status == CacheLoad::Status::missing ? "the ceilings could not be measured (see " + log_path + ")"
                                                             : "the ceilings cache is corrupt: " + load.problem;
      return rc;
    }
    rc.set = *load.set;
    rc.set.entries.clear();
    const auto if_cached = placement_groups_if_cached();
    for (const auto& e : load.set->entries) {
      if (std::find(groups.begin(), groups.end(), e.group) != groups.end() ||
          std::find(if_cached.begin(), if_cached.end(), e.group) != if_cached.end()) {
        rc.set.entries.push_back(e);
      }
    }
  } catch (const std::exception& e) {
    rc.problem = std::string("ceilings unavailable: ") + e.what();
  }
  return rc;
}

}  // namespace aisp
