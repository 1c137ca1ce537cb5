#include "device/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "core/results/results.hpp"
#include "core/measure/stats.hpp"
#include "core/base/instrumentation.hpp"
#include "core/measure/audit.hpp"
#include "core/measure/stopping.hpp"
#include "core/base/gpu_snapshot.hpp"
#include "device/activity.hpp"
#include "device/cuda_check.hpp"
#include "device/device_info.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"
#include "device/nvtx.hpp"
#include "device/nvml.hpp"
#include "device/timer.hpp"

namespace aisp {

nlohmann::json to_json(const HarnessConfig& c) {
  return {{"target", c.target},
          {"variants", c.variants},
          {"axes", c.axes},
          {"mode", to_string(c.mode)},
          {"l2_flush", to_string(c.l2_flush)},
          {"device", c.device},
          {"warmup_launches", c.warmup_launches},
          {"warmup_min_s", c.warmup_min_s},
          {"target_interval_s", c.target_interval_s},
          {"min_samples", c.rule.min_samples},
          {"min_time_s", c.rule.min_time_s},
          {"max_time_s", c.rule.max_time_s},
          {"target_rel_ci", c.rule.target_rel_ci},
          {"noisy_rel_ci", c.rule.noisy_rel_ci},
          {"audit", c.audit},
          {"audit_timed", c.audit_timed},
          {"mask_references", c.mask_references},
          {"fresh_inputs", c.fresh_inputs},
          {"fresh_launches", c.fresh_launches},
          {"seeds", c.seeds}};
}

HarnessConfig harness_config_from_json(const nlohmann::json& j) {
  HarnessConfig c;
  c.target = j.at("target").get<std::string>();
  c.variants = j.at("variants").get<std::vector<std::string>>();
  for (const auto& [k, v] : j.at("axes").items()) c.axes[k] = v.get<std::int64_t>();
  c.mode = j.at("mode").get<std::string>() == "hot" ? CacheMode::hot : CacheMode::cold;
  c.l2_flush = j.value("l2_flush", std::string("read")) == "write" ? L2Flush::write : L2Flush::read;
  c.device = j.at("device").get<int>();
  c.warmup_launches = j.at("warmup_launches").get<int>();
  c.warmup_min_s = j.at("warmup_min_s").get<double>();
  c.target_interval_s = j.at("target_interval_s").get<double>();
  c.rule.min_samples = j.at("min_samples").get<std::size_t>();
  c.rule.min_time_s = j.at("min_time_s").get<double>();
  c.rule.max_time_s = j.at("max_time_s").get<double>();
  c.rule.target_rel_ci = j.at("target_rel_ci").get<double>();
  c.rule.noisy_rel_ci = j.at("noisy_rel_ci").get<double>();
  c.audit = j.at("audit").get<bool>();
  c.audit_timed = j.value("audit_timed", true);
  c.mask_references = j.value("mask_references", true);
  c.fresh_inputs = j.value("fresh_inputs", true);
  c.fresh_launches = j.value("fresh_launches", 3);
  c.seeds = j.at("seeds").get<std::vector<std::uint64_t>>();
  return c;
}

namespace {

using Clock = std::chrono::steady_clock;

// Per-variant state through the pass.
struct Candidate {
  const VariantEntry* entry = nullptr;
  std::unique_ptr<VariantBase> impl;
  VariantResult result;
  bool alive = true;                       // still heading for PASS
  std::vector<std::uint64_t> output_hashes;  // one per seed
  std::vector<double> samples_s;           // per-launch seconds
  std::int64_t rounds = 0;                 // timed rounds taken (audited ones included)
  double warmup_launch_s = 0;              // one launch, by the warm-up (warmup_launch_s()); 0 if unknown
  int host_flags = 0;                      // timed samples over the host-time rule
  std::string host_first;                  // the first of them, for the note
  double measured_s = 0, spent_s = 0;
  bool use_blocking = true;
  StopState stop = StopState::keep_sampling;
  std::set<std::string> throttle_seen;
};

}  // namespace

std::string requirement_gap(const VariantInfo& v, const DeviceFacts& d) {
  if (v.min_cc > 0 && d.cc() < v.min_cc) {
    return fmt::format("needs compute capability {}.{}, device has {}.{}", v.min_cc / 10, v.min_cc % 10,
                       d.cc_major, d.cc_minor);
  }
  for (const auto& f : v.features) {
    // Arch-specific ("a") targets run only on exactly that architecture.
    if (f == "sm_90a" && d.cc() != 90) return "needs sm_90a (a Hopper GPU)";
    const bool multi = f == "multi_gpu" || f == "peer_gpu" || f == "all_gpus";
    if (multi && d.device_count < 2) return "needs two or more GPUs";
    if (f != "sm_90a" && !multi) return "unknown feature '" + f + "'";
  }
  return {};
}

namespace {

bool context_is_lost() {
  cudaGetLastError();  // clears an error that is not sticky
  return cudaDeviceSynchronize() != cudaSuccess;
}

class Pass {
 public:
  Pass(const HarnessConfig& c, const Emit& emit) : m_config(c), m_emit(emit) {}
  int run();

 private:
  void phase(const Candidate& c, const char* name) {
    m_emit({{"type", "phase"}, {"variant", c.result.name}, {"phase", name}});
  }
  // A timed sample's phase message says how many launches it holds and how long one took in the warm-up,
  // so that a worker ended for silence inside it is reported with what it was doing.
  void sample_phase(const Candidate& c) {
    m_emit({{"type", "phase"},
            {"variant", c.result.name},
            {"phase", "time"},
            {"batch", c.result.batch},
            {"launch_s", c.warmup_launch_s}});
  }
  void finish(Candidate& c, Verdict v, std::string reason) {
    c.alive = false;
    c.result.verdict = v;
    c.result.reason = std::move(reason);
    m_emit({{"type", "variant"}, {"result", to_json(c.result)}});
  }
  // Runs `body` for a candidate; a CUDA or other error costs only that candidate, unless the context is
  // lost, in which case the worker must end (returns false).
  template <class F>
  bool guarded(Candidate& c, F&& body);
  bool fail_if(Candidate& c, bool failed, const char* check, std::string reason) {
    if (!failed) return false;
    c.result.validation->failed_check = check;
    finish(c, Verdict::fail, std::move(reason));
    return true;
  }
  void check_outputs(Candidate& c, const char* check_name);
  std::uint64_t hash_all(const std::vector<TensorView>& views);
  void load_inputs(std::uint64_t seed);
  void mask_references();
  void validate_seed(std::size_t seed_index);
  void read_facts(Candidate& c);
  void audit(Candidate& c);
  bool audit_at(Candidate& c, int launches, const std::string& point);
  bool audits_timed() const { return m_config.audit && m_config.audit_timed; }
  void read_telemetry();
  void warm_up(Candidate& c);
  void time_rounds();
  void timed_output_check(Candidate& c);
  using FreshTimes = std::map<const Candidate*, std::vector<double>>;
  void fresh_input_check();
  void fresh_input_round(const std::vector<Candidate*>& cands, std::vector<std::uint64_t>& seeds,
                         FreshTimes& fresh, FreshTimes& repeat);
  FreshInputTimes record_fresh_inputs(Candidate& c, std::vector<std::uint64_t> seeds,
                                      const std::vector<double>& fresh, const std::vector<double>& repeat) const;
  FreshBaseline fresh_baseline(const Candidate& c) const;

  const HarnessConfig& m_config;
  const Emit& m_emit;
  std::unique_ptr<ProblemBase> m_problem;
  std::vector<Candidate> m_candidates;
  std::unique_ptr<SampleTimer> m_timer;
  cudaStream_t m_stream = nullptr;
  std::uint64_t m_input_hash = 0;
  bool m_context_lost = false;
  std::unique_ptr<ActivityRecorder> m_recorder;
  std::string m_recorder_missing;   // why there is no CUPTI audit, when there is none
  std::shared_ptr<Nvml> m_nvml;
  std::optional<int> m_nvml_index;
  // Drawn at run time from the OS's entropy, never stored: the reference mask's key, the audit
  // schedule's seed and the fresh seeds (docs/trust.md). A variant cannot know them in advance.
  std::random_device m_entropy;
  std::uint64_t draw() { return (std::uint64_t{m_entropy()} << 32) ^ m_entropy(); }
  std::uint64_t m_ref_key = 0;           // 0 = references not masked
  std::vector<std::uint64_t> m_ref_keys;  // per reference: m_ref_key, or 0 where it is an input or output
  std::optional<AuditSchedule> m_schedule;
  double m_noise_floor_s = 0;
  double m_fresh_floor_s = 0;  // the fresh-input check's unit of margin (see run())
  ClockKind m_timer_clock = ClockKind::gpu;
};

template <class F>
bool Pass::guarded(Candidate& c, F&& body) {
  try {
    body();
    // A variant that switched devices (or failed half-way through doing so) must not leave the harness
    // working on the wrong GPU.
    AISP_CUDA_CHECK(cudaSetDevice(m_config.device));
    return true;
  } catch (const VariantUnavailable& e) {
    // What the machine lacks at run time (a library, a driver): a fact about the machine, not a failure.
    cudaSetDevice(m_config.device);
    c.result.validation.reset();
    finish(c, Verdict::skipped, e.what());
  } catch (const CudaError& e) {
    cudaSetDevice(m_config.device);
    m_context_lost = context_is_lost();
    finish(c, Verdict::error, std::string(m_context_lost ? "sticky CUDA error: " : "CUDA error: ") + e.what());
  } catch (const std::exception& e) {
    finish(c, Verdict::error, std::string("exception: ") + e.what());
  }
  return false;
}

std::uint64_t Pass::hash_all(const std::vector<TensorView>& views) {
  std::uint64_t h = 0;
  for (const auto& v : views) h = h * 0x100000001b3ULL ^ hash_bytes(v, m_stream);
  return h;
}

void Pass::check_outputs(Candidate& c, const char* check_name) {
  auto& val = *c.result.validation;
  const auto outs = m_problem->outputs();
  const auto refs = m_problem->references();
  for (std::size_t i = 0; i < outs.size() && i < refs.size() && c.alive; ++i) {
    const std::uint64_t key = i < m_ref_keys.size() ? m_ref_keys[i] : 0;
    const auto cmp = compare(outs[i], refs[i], m_problem->tolerance(), m_stream, 10, key);
    val.elements_checked += cmp.checked;
    val.max_abs_error = std::max(val.max_abs_error, cmp.max_abs_error);
    val.max_rel_error = std::max(val.max_rel_error, cmp.max_rel_error);
    if (cmp.mismatches > 0) {
      val.output_name = outs[i].name;
      val.mismatches = cmp.mismatches;
      val.first_mismatches = cmp.first_mismatches;
      std::string first;
      if (!cmp.first_mismatches.empty()) {
        const auto& m = cmp.first_mismatches.front();
        first = fmt::format("; first at [{}]: got {:.6g}, expected {:.6g}", m.index, m.got, m.expected);
      }
      fail_if(c, true, check_name,
              fmt::format("{} of {} elements of '{}' out of tolerance ({}){}", cmp.mismatches, cmp.checked,
                          outs[i].name, check_name, first));
    }
  }
  if (c.alive) {
    const std::string why = m_problem->judge_outputs(m_stream);  // ordered after the launch on m_stream
    fail_if(c, !why.empty(), check_name, why);
  }
  if (c.alive) {
    fail_if(c, hash_all(m_problem->inputs()) != m_input_hash, "input_modified",
            "the variant modified its input (input hash changed)");
  }
}

// A reference that is also an input or an output (a copy's reference is its input) is handed to the
// variants anyway: it stays as it is. Every other reference is masked in place (docs/trust.md).
void Pass::mask_references() {
  m_ref_keys.clear();
  const auto refs = m_problem->references();
  std::vector<TensorView> handed = m_problem->inputs();
  for (const auto& o : m_problem->outputs()) handed.push_back(o);
  const auto overlaps = [](const TensorView& a, const TensorView& b) {
    const auto* a0 = static_cast<const char*>(a.data);
    const auto* b0 = static_cast<const char*>(b.data);
    return a0 < b0 + b.count * size_of(b.dtype) && b0 < a0 + a.count * size_of(a.dtype);
  };
  for (const auto& r : refs) {
    const bool shared = std::any_of(handed.begin(), handed.end(), [&](const TensorView& h) { return overlaps(r, h); });
    const std::uint64_t key = (m_ref_key != 0 && !shared) ? m_ref_key : 0;
    if (key != 0) mask_reference(r, key, m_stream);
    m_ref_keys.push_back(key);
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
}

// New inputs and references from `seed`, references masked, the input hash taken: the state every
// validated or checked launch starts from.
void Pass::load_inputs(std::uint64_t seed) {
  m_problem->generate(seed, m_stream);
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  mask_references();
  m_input_hash = hash_all(m_problem->inputs());
}

void Pass::validate_seed(std::size_t seed_index) {
  const std::uint64_t seed = m_config.seeds[seed_index];
  load_inputs(seed);
  for (auto& c : m_candidates) {
    if (!c.alive) continue;
    // A variant before this one may have modified the inputs (it fails for that): start from clean ones.
    if (hash_all(m_problem->inputs()) != m_input_hash) load_inputs(seed);
    phase(c, "validate");
    c.result.validation->seeds.push_back(seed);
    c.result.validation->reference_masked = m_ref_key != 0;
    const bool ok = guarded(c, [&] {
      for (const auto& o : m_problem->outputs()) poison(o, m_stream);
      c.impl->launch(*m_problem, m_stream);
      AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
      check_outputs(c, "mismatch");
      if (c.alive) c.output_hashes.push_back(hash_all(m_problem->outputs()));
    });
    if (!ok && m_context_lost) return;
  }
}

// The variant's own facts (registers, occupancy, a serving ladder's hit rate, ...), after setup and again
// after the timed launches (each read replaces the last). They describe the variant and never decide its
// verdict: a variant that cannot report them gets a note instead.
void Pass::read_facts(Candidate& c) {
  c.result.facts.clear();
  try {
    for (auto& f : c.impl->facts(*m_problem)) c.result.facts.emplace_back(std::move(f.name), std::move(f.value));
  } catch (const std::exception& e) {
    c.result.facts.clear();
    c.result.notes.push_back(std::string("facts not read: ") + e.what());
  }
  cudaGetLastError();  // a failed attribute query must not look like the next launch's error
  cudaSetDevice(m_config.device);
}

void Pass::audit(Candidate& c) {
  phase(c, "audit");
  c.impl->launch(*m_problem, m_stream);  // a warm launch first: module loading and lazy set-up are not the variant's doing
  AISP_CUDA_CHECK(cudaDeviceSynchronize());
  audit_at(c, 2, "before validation");
}

// Audited launches of `c` at one point of its pass (docs/trust.md "Audit points"). Returns false when a
// finding ended the variant as INVALID.
bool Pass::audit_at(Candidate& c, int launches, const std::string& point) {
  const auto launch = [&] { c.impl->launch(*m_problem, m_stream); };
  if (!c.result.audit) {
    c.result.audit = AuditRecord{};
    c.result.audit->method = m_recorder ? "cupti" : "timing";
  }
  AuditRecord& rec = *c.result.audit;
  // The harness's own work before the launch (the L2 flush of a cold sample) runs before the recorder
  // starts: none of its records may be mistaken for the variant's.
  if (m_config.mode == CacheMode::cold) m_timer->flush_l2();
  AISP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::string> findings;
  if (m_recorder) m_recorder->start();
  for (int k = 0; k < launches; ++k) {
    const auto a = m_timer->time_for_audit(launch);
    rec.launches++;
    if (a.host_launch_s * 1e3 > rec.host_launch_ms) {
      rec.host_launch_ms = a.host_launch_s * 1e3;
      rec.event_ms = a.event_s * 1e3;
    }
    rec.drain_ms = std::max(rec.drain_ms, a.drain_s * 1e3);
    if (a.blocking_timed_out) continue;  // a launch that waits on its stream: the window checks do not apply
    for (auto& f : find_timing_escapes({a.host_launch_s, a.event_s, a.drain_s})) findings.push_back(std::move(f));
  }
  // A host-time finding alone may be one stall of the host thread: it stands only if another audited
  // launch trips the rule too (a variant that works on the host does so on every launch).
  const auto host_only = [](const std::vector<std::string>& fs) {
    return !fs.empty() && std::all_of(fs.begin(), fs.end(), [](const std::string& f) {
      return f.find("on the host against") != std::string::npos;
    });
  };
  if (host_only(findings)) {
    const auto again = m_timer->time_for_audit(launch);
    rec.launches++;
    if (find_host_work(again.host_launch_s, again.event_s, 1).empty()) {
      c.result.notes.push_back("host time over the rule once (" + findings.front() +
                               "), not on a second audited launch: a stalled host thread, not a finding");
      findings.clear();
    }
  }
  // Give work launched late from another thread (a host callback, say) time to show up in the records.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  AISP_CUDA_CHECK(cudaDeviceSynchronize());
  if (m_recorder) {
    AuditWindowInput in;
    in.records = m_recorder->stop();
    in.device = static_cast<std::uint32_t>(m_config.device);
    // "peer_gpu": the variant declares work on the next GPU (a copy staged from it, say); only there.
    // "all_gpus": on every GPU of the process (a collective's ranks, ch04). Its work there must still be
    // ordered after the harness stream and joined back into it, like work on this GPU.
    const auto& features = c.entry->info.features;
    const auto declares = [&](const char* f) {
      return std::find(features.begin(), features.end(), f) != features.end();
    };
    int count = 0;
    AISP_CUDA_CHECK(cudaGetDeviceCount(&count));
    for (int d = 0; d < count; ++d) {
      const bool next = d == (m_config.device + 1) % count;
      if (d != m_config.device && (declares("all_gpus") || (declares("peer_gpu") && next))) {
        in.peer_devices.push_back(static_cast<std::uint32_t>(d));
      }
    }
    in.harness_stream = m_recorder->stream_id(m_stream);
    in.blocking_kernel_name = k_blocking_kernel_name;
    in.end_marker_name = k_audit_marker_name;
    auto escapes = find_window_escapes(in);
    findings.insert(findings.begin(), escapes.begin(), escapes.end());
  }
  rec.points.push_back(point);
  const std::size_t before = rec.findings.size();
  // The same escape shows up once per audited launch: report each distinct finding once.
  for (auto& f : findings) {
    if (std::find(rec.findings.begin(), rec.findings.end(), f) == rec.findings.end()) rec.findings.push_back(f);
  }
  if (rec.findings.size() == before) return true;
  const std::size_t more = rec.findings.size() - before - 1;
  const auto tool = detect_instrumentation(process_environment());
  finish(c, Verdict::invalid,
         fmt::format("{}{} (audited {}){}", rec.findings[before],
                     more ? fmt::format(" (and {} more findings)", more) : std::string(), point,
                     tool ? instrumentation_audit_hint(*tool) : std::string()));
  return false;
}

// NVML telemetry once per round, credited to every variant still sampling: clocks, power, temperature and
// throttle reasons over the variant's whole sampling period (docs/measurement.md "Telemetry").
void Pass::read_telemetry() {
  if (!m_nvml || !m_nvml_index) return;
  const GpuTelemetry t = m_nvml->telemetry(*m_nvml_index);
  for (auto& c : m_candidates) {
    if (!c.alive || c.stop != StopState::keep_sampling) continue;
    if (!c.result.telemetry) {
      TelemetryRecord r;
      r.sm_clock_mhz_min = 1e12;
      c.result.telemetry = r;
    }
    auto& r = *c.result.telemetry;
    if (t.sm_clock_mhz) {
      r.sm_clock_mhz_min = std::min(r.sm_clock_mhz_min, double(*t.sm_clock_mhz));
      r.sm_clock_mhz_max = std::max(r.sm_clock_mhz_max, double(*t.sm_clock_mhz));
    }
    if (t.power_draw_w) r.power_w_max = std::max(r.power_w_max, *t.power_draw_w);
    if (t.temperature_c) r.temperature_c_max = std::max(r.temperature_c_max, double(*t.temperature_c));
    for (const auto& name : t.throttle_reason_names) c.throttle_seen.insert(name);
    constexpr std::uint64_t k_heat_or_power = throttle::sw_power_cap | throttle::hw_slowdown |
                                              throttle::sw_thermal | throttle::hw_thermal |
                                              throttle::hw_power_brake;
    if (t.throttle_reasons && (*t.throttle_reasons & k_heat_or_power)) r.throttled = true;
  }
}

void Pass::warm_up(Candidate& c) {
  phase(c, "warmup");
  const auto launch = [&] { c.impl->launch(*m_problem, m_stream); };
  std::vector<double> times;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const auto settled = [&] {
    if (times.size() < 3) return false;
    const double a = times[times.size() - 1], b = times[times.size() - 2], d = times[times.size() - 3];
    const double mid = std::max(std::min(a, b), std::min(std::max(a, b), d));
    return std::fabs(a - mid) <= 0.05 * mid && std::fabs(b - mid) <= 0.05 * mid &&
           std::fabs(d - mid) <= 0.05 * mid;
  };
  while (static_cast<int>(times.size()) < m_config.warmup_launches || elapsed() < m_config.warmup_min_s ||
         (!settled() && elapsed() < 1.0)) {
    const auto s = m_timer->time(launch, 1, c.use_blocking);
    if (s.blocking_timed_out) {
      c.use_blocking = false;
      c.result.notes.push_back("launch waits on the stream: timed without the blocking kernel, so host "
                               "launch cost is inside the samples");
    }
    times.push_back(s.seconds);
  }
  c.warmup_launch_s = warmup_launch_s(times);
  c.result.batch = m_config.mode == CacheMode::hot
                       ? hot_batch(c.warmup_launch_s, m_config.target_interval_s, SampleTimer::k_max_blocked_batch)
                       : 1;
}

void Pass::time_rounds() {
  // Interleaved rounds: A B C, A B C, ... so that drift in clocks or co-tenants hits every variant alike.
  bool any = true;
  while (any) {
    any = false;
    read_telemetry();
    for (auto& c : m_candidates) {
      if (!c.alive || c.stop != StopState::keep_sampling) continue;
      any = true;
      const auto launch = [&] { c.impl->launch(*m_problem, m_stream); };
      const auto t0 = Clock::now();
      ++c.rounds;
      // Some rounds are audited instead of timed, at points the variant cannot predict (AuditSchedule).
      // A variant that waits on its stream cannot be held by the blocking kernel: it is not audited here.
      // Its phase message is marked, so that the progress log and display do not count it as a sample.
      if (audits_timed() && c.use_blocking && m_schedule->audits(c.rounds)) {
        m_emit({{"type", "phase"}, {"variant", c.result.name}, {"phase", "time"}, {"audit", true}});
        if (!guarded(c, [&] { audit_at(c, 1, fmt::format("at timed round {}", c.rounds)); }) && m_context_lost) return;
        continue;  // an audited launch is not a sample
      }
      sample_phase(c);
      const bool ok = guarded(c, [&] {
        const auto s = m_timer->time(launch, c.result.batch, c.use_blocking);
        if (s.blocking_timed_out) {
          c.use_blocking = false;
          c.result.notes.push_back("blocking kernel timed out during sampling; sample dropped");
          return;
        }
        // Host work inside launch(), judged on every sample: the GPU clock cannot see it (docs/trust.md).
        // A single stall of the host thread is not a finding; repeated host time is.
        if (s.blocked && m_timer_clock == ClockKind::gpu) {
          if (auto f = find_host_work(s.host_launch_s, s.seconds, c.result.batch); !f.empty()) {
            ++c.host_flags;
            if (c.host_first.empty()) c.host_first = fmt::format("{} (timed round {})", f, c.rounds);
            if (host_work_is_finding(c.host_flags, static_cast<int>(c.samples_s.size()) + 1)) {
              if (!c.result.audit) c.result.audit = AuditRecord{.method = "timing"};
              c.result.audit->findings.push_back(f);
              finish(c, Verdict::invalid,
                     fmt::format("{} (timed round {}; over the rule on {} of {} samples)", f, c.rounds,
                                 c.host_flags, c.samples_s.size() + 1));
              return;
            }
          }
        }
        c.samples_s.push_back(s.seconds / c.result.batch);
        c.result.samples_ms.push_back(s.seconds / c.result.batch * 1e3);
        c.measured_s += s.seconds;
      });
      if (!ok) {
        if (m_context_lost) return;
        continue;
      }
      if (!c.alive) continue;
      c.spent_s += std::chrono::duration<double>(Clock::now() - t0).count();
      c.stop = evaluate_stop(m_config.rule, c.samples_s, c.measured_s, c.spent_s);
    }
  }
}

void Pass::timed_output_check(Candidate& c) {
  phase(c, "timed_output_check");
  for (const auto& o : m_problem->outputs()) poison(o, m_stream);
  if (audits_timed() && c.use_blocking) {
    // The launch whose output is checked is audited too: a variant that behaves only when it is
    // watched would have to guess that this one is.
    if (!audit_at(c, 1, "at the timed-output launch")) return;
  } else {
    m_timer->time([&] { c.impl->launch(*m_problem, m_stream); }, 1, c.use_blocking);
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  c.result.validation->timed_output_checked = true;
  check_outputs(c, "timed_output");
}

// Launches on inputs from seeds never used before, drawn just before them (docs/trust.md "State kept
// between launches"): each must be right, and must take about as long as the launches timed on inputs
// the variant had seen. A variant that replays a stored answer when its inputs repeat is right on every
// other check; here it must do the work, and the time shows it.
// What the fresh launches are compared with: fresh_input_baseline's choice (core/measure/audit.hpp).
FreshBaseline Pass::fresh_baseline(const Candidate& c) const {
  return fresh_input_baseline(m_config.mode, m_timer_clock, c.result.batch, !c.samples_s.empty());
}

// One round of the check for `cands`: on each of fresh_launches seeds drawn now, each candidate's first
// launch (checked, timed) and, unless it is compared with the timed median, its paired repeat. Appends
// the seeds and the times.
void Pass::fresh_input_round(const std::vector<Candidate*>& cands, std::vector<std::uint64_t>& seeds,
                             FreshTimes& fresh, FreshTimes& repeat) {
  for (int j = 0; j < m_config.fresh_launches; ++j) {
    const std::uint64_t seed = draw();
    seeds.push_back(seed);
    load_inputs(seed);
    for (Candidate* c : cands) {
      if (!c->alive) continue;
      if (hash_all(m_problem->inputs()) != m_input_hash) load_inputs(seed);
      phase(*c, "fresh_inputs");
      const auto launch = [&] { c->impl->launch(*m_problem, m_stream); };
      const bool ok = guarded(*c, [&] {
        for (const auto& o : m_problem->outputs()) poison(o, m_stream);
        const auto first = m_timer->time(launch, 1, c->use_blocking);
        AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
        check_outputs(*c, "fresh_inputs");
        if (!c->alive) return;
        if (fresh_baseline(*c) == FreshBaseline::timed_median) {  // nothing to pair it with
          fresh[c].push_back(first.seconds);
          return;
        }
        // The repeat launch gets the same preparation as the first (the inputs generated again from the
        // same seed, the outputs poisoned), so the two single launches differ only in whether the variant
        // has seen these inputs: the generator's own kernels (a reference GEMM, a fill) leave the caches
        // and clocks as they leave them before the first.
        load_inputs(seed);
        for (const auto& o : m_problem->outputs()) poison(o, m_stream);
        const auto again = m_timer->time(launch, 1, c->use_blocking);  // the same inputs, now seen once
        fresh[c].push_back(first.seconds);
        repeat[c].push_back(again.seconds);
      });
      if (!ok && m_context_lost) return;
    }
  }
}

// One round's record (its medians, and every seed drawn so far) in the variant's validation, and its
// times as the audit judges them.
FreshInputTimes Pass::record_fresh_inputs(Candidate& c, std::vector<std::uint64_t> seeds,
                                          const std::vector<double>& fresh, const std::vector<double>& repeat) const {
  FreshInputsRecord rec;
  rec.seeds = std::move(seeds);
  rec.fresh_ms = stats::median(fresh) * 1e3;
  const SeenTime seen = seen_time(fresh_baseline(c), c.samples_s.empty() ? 0 : stats::median(c.samples_s),
                                  repeat.empty() ? 0 : stats::median(repeat));
  rec.compared_with = seen.name;
  rec.seen_ms = seen.seconds * 1e3;
  rec.ratio = rec.seen_ms > 0 ? rec.fresh_ms / rec.seen_ms : 0;
  c.result.validation->fresh_inputs = rec;
  return {rec.fresh_ms * 1e-3, rec.seen_ms * 1e-3, m_fresh_floor_s};
}

// A variant flagged by the first round is measured again on as many new seeds, and is INVALID only if
// the retest flags it too (judge_fresh_inputs). State kept between launches is there on every fresh
// input, so a variant that replays answers fails both rounds; a transient (a first target on a GPU that
// has just started: honest 0.14-0.25 ms wall-clock launches of ch01:goodput at 1.29x and 1.39x once on one
// H200, 0.77-1.07x in eight passes after it) does not recur. The record holds the last round's times and
// every seed.
void Pass::fresh_input_check() {
  std::vector<Candidate*> live;
  for (auto& c : m_candidates) {
    if (c.alive) live.push_back(&c);
  }
  if (live.empty() || !m_config.fresh_inputs || m_config.fresh_launches < 1) return;
  std::vector<std::uint64_t> seeds;
  FreshTimes fresh, repeat;
  fresh_input_round(live, seeds, fresh, repeat);
  if (m_context_lost) return;
  std::vector<Candidate*> flagged;
  std::map<const Candidate*, FreshInputTimes> first;
  for (Candidate* c : live) {
    if (!c->alive || fresh[c].empty()) continue;
    first[c] = record_fresh_inputs(*c, seeds, fresh[c], repeat[c]);
    if (needs_fresh_retest(first[c])) flagged.push_back(c);
  }
  if (flagged.empty()) return;
  FreshTimes fresh2, repeat2;
  fresh_input_round(flagged, seeds, fresh2, repeat2);  // appends the retest's seeds
  if (m_context_lost) return;
  for (Candidate* c : flagged) {
    if (!c->alive || fresh2[c].empty()) continue;
    const FreshInputTimes again = record_fresh_inputs(*c, seeds, fresh2[c], repeat2[c]);
    const FreshInputOutcome outcome = judge_fresh_inputs(first[c], &again);
    if (!outcome.finding.empty()) finish(*c, Verdict::invalid, outcome.finding);
    if (!outcome.note.empty()) c->result.notes.push_back(outcome.note);
  }
}

int Pass::run() {
  const TargetEntry* entry = LadderRegistry::instance().find(m_config.target);
  if (!entry) throw std::runtime_error("worker: unknown target " + m_config.target);
  AISP_CUDA_CHECK(cudaSetDevice(m_config.device));
  const DeviceFacts device = query_device(m_config.device);
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));

  for (const auto& stem : m_config.variants) {
    const auto it = std::find_if(entry->variants.begin(), entry->variants.end(),
                                 [&](const VariantEntry& v) { return v.info.file_stem() == stem; });
    if (it == entry->variants.end()) throw std::runtime_error("worker: unknown variant " + stem);
    Candidate c;
    c.entry = &*it;
    const VariantInfo& info = it->info;
    c.result.name = entry->info.variant_name(info);
    c.result.step = info.step;
    c.result.slug = info.slug;
    c.result.kind = info.kind;
    c.result.summary = info.summary;
    c.result.precision = info.precision;
    c.result.validation = Validation{};
    m_candidates.push_back(std::move(c));
  }

  m_problem = entry->make_problem();
  m_problem->allocate(m_config.axes, device);
  m_timer = std::make_unique<SampleTimer>(device, m_stream, entry->info.clock, m_config.mode, m_config.l2_flush);
  const double floor_s = m_timer->measure_noise_floor();
  m_noise_floor_s = floor_s;
  // A single wall-clock launch jitters by about one launch round trip, far more than an empty interval
  // on that clock: the fresh-input margin for those targets counts in round trips (docs/trust.md).
  m_fresh_floor_s = entry->info.clock == ClockKind::wall ? m_timer->measure_roundtrip() : floor_s;
  // Set after the noise floor: the floor is the timer's alone, not the ladder's preparation.
  // New references from the preparation are masked like generate()'s (docs/trust.md).
  m_timer->set_before_sample([this] {
    if (m_problem->prepare_sample()) mask_references();
  });
  m_timer_clock = entry->info.clock;
  if (m_config.mask_references) {
    while (m_ref_key == 0) m_ref_key = draw();
  }
  m_schedule.emplace(draw());
  const Work work = m_problem->work();
  m_emit({{"type", "target"},
          {"bytes_per_launch", work.bytes},
          {"flops_per_launch", work.flops},
          {"bytes_read_per_launch", work.bytes_read},
          {"bytes_written_per_launch", work.bytes_written},
          {"flop_dtype", work.flop_dtype},
          {"memory_ceiling", work.ceiling},
          {"noise_floor_ms", floor_s * 1e3}});

  // Inputs exist before set-up, as they would in a program: a variant that precomputes its answer in
  // setup() can then do so, and the second seed must catch it.
  load_inputs(m_config.seeds.front());
  if (m_config.audit) m_recorder = ActivityRecorder::create(&m_recorder_missing);
  std::string nvml_missing;
  m_nvml = Nvml::load(&nvml_missing);
  if (m_nvml) m_nvml_index = m_nvml->index_of_pci_bus_id(device.pci_bus_id);

  for (auto& c : m_candidates) {
    const std::string gap = requirement_gap(c.entry->info, device);
    if (!gap.empty()) {
      c.result.validation.reset();
      finish(c, Verdict::skipped, gap);
      continue;
    }
    phase(c, "setup");
    if (!guarded(c, [&] {
          c.impl = with_nvtx_range(c.entry->make(), c.result.name);
          c.impl->setup(*m_problem, m_stream);
          AISP_CUDA_CHECK(cudaStreamSynchronize(m_stream));
        }) && m_context_lost) {
      return k_worker_exit_sticky_error;
    }
    if (c.alive) read_facts(c);
  }

  if (m_config.audit) {
    for (auto& c : m_candidates) {
      if (!c.alive) continue;
      if (!m_recorder) c.result.notes.push_back("audit by timing only: " + m_recorder_missing);
      if (!guarded(c, [&] { audit(c); }) && m_context_lost) return k_worker_exit_sticky_error;
    }
  }

  for (std::size_t s = 0; s < m_config.seeds.size(); ++s) {
    validate_seed(s);
    if (m_context_lost) return k_worker_exit_sticky_error;
  }
  for (auto& c : m_candidates) {
    if (!c.alive || !m_problem->output_depends_on_inputs() || c.output_hashes.size() < 2) continue;
    fail_if(c, c.output_hashes.front() == c.output_hashes.back(), "output_unchanged_between_seeds",
            "output identical for two different seeds: a cached or precomputed answer");
  }

  for (auto& c : m_candidates) {
    if (c.alive && !guarded(c, [&] { warm_up(c); }) && m_context_lost) return k_worker_exit_sticky_error;
  }
  time_rounds();
  if (m_context_lost) return k_worker_exit_sticky_error;
  for (auto& c : m_candidates) {
    if (c.alive && !guarded(c, [&] { timed_output_check(c); }) && m_context_lost) {
      return k_worker_exit_sticky_error;
    }
  }
  fresh_input_check();
  if (m_context_lost) return k_worker_exit_sticky_error;
  // Again for the variants still standing: facts that describe a launch (a serving ladder's prefix-cache
  // hit rate or TTFT) then come from its last one, made like the timed ones, not from the setup launch
  // that captured graphs and warmed caches. A variant that fell earlier keeps what setup gave.
  for (auto& c : m_candidates) {
    if (c.alive) read_facts(c);
  }
  for (auto& c : m_candidates) {
    if (!c.alive) continue;
    if (auto& t = c.result.telemetry) {
      t->throttle_reasons.assign(c.throttle_seen.begin(), c.throttle_seen.end());
      if (t->sm_clock_mhz_max > 0 && t->sm_clock_mhz_min < 0.95 * t->sm_clock_mhz_max) t->throttled = true;
      if (t->sm_clock_mhz_max == 0) t->sm_clock_mhz_min = 0;
    }
    if (c.host_flags > 0) {
      c.result.notes.push_back(fmt::format("host time over the rule on {} of {} timed samples, too few to be a "
                                           "finding (a stalled host thread); the first: {}",
                                           c.host_flags, c.samples_s.size(), c.host_first));
    }
    const auto summary = stats::summarize(c.samples_s);
    if (c.stop == StopState::budget_spent_noisy && !summary.median_ci.valid) {
      // Launches of seconds (the serving ladders) can spend the budget before a 95% interval exists:
      // say so, rather than quote the half-width of an interval that supports no claim.
      finish(c, Verdict::noisy,
             fmt::format("{} timed samples in the {:.1f} s budget, too few for a 95% CI of the median "
                         "(raise --max-time)",
                         c.samples_s.size(), m_config.rule.max_time_s));
    } else if (c.stop == StopState::budget_spent_noisy) {
      finish(c, Verdict::noisy,
             fmt::format("95% CI of the median still +-{:.1f}% after {} samples in {:.1f} s (budget {:.1f} s, "
                         "sampled on only while the interval could narrow to +-{:.0f}%)",
                         100 * summary.rel_ci_half_width, c.samples_s.size(), c.spent_s,
                         m_config.rule.max_time_s, 100 * m_config.rule.noisy_rel_ci));
    } else {
      finish(c, Verdict::pass, "");
    }
  }
  cudaStreamDestroy(m_stream);
  return 0;
}

}  // namespace

int run_target(const HarnessConfig& config, const Emit& emit) {
  Pass pass(config, emit);
  return pass.run();
}

}  // namespace aisp
