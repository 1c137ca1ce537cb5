// The audit's rules (docs/trust.md), as pure functions of what was recorded: every kernel, copy and memset
// of an audited launch must start after the window opens, end before it closes, and run on the harness's
// device; launch() must not hide host work from the GPU clock; nothing may keep running after the end event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/registry.hpp"

namespace aisp {

struct ActivityRecord {
  enum class Kind { kernel, memcpy, memset } kind = Kind::kernel;
  std::string name;          // kernel name, or "memcpy" / "memset"
  std::uint64_t start = 0;   // ns, CUPTI's clock
  std::uint64_t end = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;  // CUPTI stream id
};

struct AuditWindowInput {
  std::vector<ActivityRecord> records;  // everything recorded during the audit
  std::uint32_t device = 0;             // the harness's device
  std::vector<std::uint32_t> peer_devices;  // devices the variant declares it works on too (feature "peer_gpu")
  std::uint32_t harness_stream = 0;     // CUPTI id of the harness stream (0 = unknown)
  std::string blocking_kernel_name;     // substring naming the kernel that holds the stream (window opens at its end)
  std::string end_marker_name;          // substring naming the kernel that marks the window's close (its start)
};

// Findings from the activity records, one line each; empty when every record is inside its window.
std::vector<std::string> find_window_escapes(const AuditWindowInput& in);

struct AuditTimes {
  double host_launch_s = 0;  // time the host spent inside launch()
  double event_s = 0;        // the timed interval on the GPU clock
  double drain_s = 0;        // time until the device was idle after the end event completed
};

// Findings from the host-side timings: work hidden on the host, or left running after the window.
std::vector<std::string> find_timing_escapes(const AuditTimes& t);

// Thresholds, documented in docs/trust.md.
inline constexpr double k_audit_max_drain_s = 1e-3;
inline constexpr double k_audit_min_host_budget_s = 1e-3;

// The host-time rule for one timed sample of `batch` launches behind the blocking kernel: per launch,
// the host may spend at most max(1 ms, 2 x the GPU interval) inside launch(). "" when within it, else the
// finding. Applied to every timed sample (it costs two clock reads), not only to audited launches.
std::string find_host_work(double host_launch_s, double event_s, int batch);
// One sample over that rule is not yet a finding: the host thread can be descheduled for milliseconds
// while the GPU waits behind the blocking kernel (seen once in 205 samples of a 20 us honest kernel on an
// H100 machine). Host work that buys a variant a faster median happens on a good share of its launches:
// the rule is a finding once it fires on at least 3 samples and at least 10% of those taken.
inline constexpr int k_host_work_min_count = 3;
inline constexpr double k_host_work_min_fraction = 0.10;
bool host_work_is_finding(int flagged_samples, int samples);

// Where the audit looks among the timed rounds (docs/trust.md "Audit points"): exactly one round, drawn
// at random from `seed`, in each window [2^k, 2^(k+1)) of round numbers (rounds count from 1). A
// variant that starts to misbehave at round R is audited before round 4R, and a run of N rounds audits
// about log2(N) of them, so the audit's cost stays small however long sampling lasts.
class AuditSchedule {
 public:
  explicit AuditSchedule(std::uint64_t seed) : m_seed(seed) {}
  bool audits(std::int64_t round) const;  // round >= 1
  std::int64_t audited_round_in_window(int k) const;  // the round chosen in [2^k, 2^(k+1))

 private:
  std::uint64_t m_seed;
};

// The fresh-inputs check (docs/trust.md "State kept between launches"): launches on inputs from seeds
// never used before, drawn just before them, must take about as long as the launches the timing measured
// on inputs the variant had already seen. Medians in seconds.
struct FreshInputTimes {
  double fresh_s = 0;      // median of the launches on fresh inputs (each the first on its inputs)
  double seen_s = 0;       // what it is compared with: seen_time() of fresh_input_baseline() (below)
  double noise_floor_s = 0;
};
// What the first launches on fresh inputs are compared with (docs/trust.md "Fresh inputs"):
//  - timed_median: cold single launches on the GPU clock, where a timed sample is itself a single launch
//    after an L2 flush, like a fresh one, and the clock cannot see the host.
//  - repeat_launches: hot samples (batches, which a single launch cannot match), and anything without
//    timed samples: a repeat launch on the same inputs, prepared the same way as the first.
//  - slower_of_both: cold single launches on the wall clock, which times the host and the machine around
//    the GPU too, and each of the two ways of seeing the inputs again is favoured by state that is not the
//    variant's: the timing loop by the host's warmth (ch13:allocator's cudaMalloc steps 1.5x faster back to
//    back than after the check's preparation on one H200 host), a repeat on the same inputs by caches
//    below the variant (ch05:file_to_gpu's repeat read of the same range from the drive's cache, 1.3-1.45x
//    faster on another). A variant's own state makes both faster than a fresh launch.
enum class FreshBaseline { timed_median, repeat_launches, slower_of_both };
[[nodiscard]] inline FreshBaseline fresh_input_baseline(CacheMode mode, ClockKind clock, int batch,
                                                        bool has_timed_samples) {
  if (mode != CacheMode::cold || batch != 1 || !has_timed_samples) return FreshBaseline::repeat_launches;
  return clock == ClockKind::gpu ? FreshBaseline::timed_median : FreshBaseline::slower_of_both;
}
// The time on seen inputs that `b` compares with, and its name for the record ("timed median" or
// "repeat launches": for slower_of_both, the one chosen). A missing median (0) is never chosen.
struct SeenTime {
  double seconds = 0;
  const char* name = "";
};
[[nodiscard]] inline SeenTime seen_time(FreshBaseline b, double timed_median_s, double repeat_median_s) {
  const SeenTime timed{timed_median_s, "timed median"}, repeat{repeat_median_s, "repeat launches"};
  if (b == FreshBaseline::timed_median) return timed;
  if (b == FreshBaseline::repeat_launches) return repeat;
  return timed_median_s >= repeat_median_s ? timed : repeat;
}
// The margin: slower by more than this factor AND by more than k_fresh_min_noise_floors noise floors.
inline constexpr double k_fresh_max_ratio = 1.25;
inline constexpr double k_fresh_min_noise_floors = 5.0;
// "" when within the margin, else the finding ("result depends on state kept between launches: ...").
std::string find_state_dependence(const FreshInputTimes& t);

// The check's outcome over its rounds (docs/trust.md "The retest"): a variant the first round flags is
// measured again on new seeds, and the retest decides. State kept between launches shows on every fresh
// input, so it is flagged twice; a transient is flagged once and leaves a note with both ratios.
struct FreshInputOutcome {
  std::string finding;  // non-empty: INVALID, with this reason (the retest's finding and the first ratio)
  std::string note;     // non-empty: flagged once, not on the retest
};
// Whether the first round asks for a retest (it flagged the variant).
[[nodiscard]] inline bool needs_fresh_retest(const FreshInputTimes& first) {
  return !find_state_dependence(first).empty();
}
// `retest` is required when needs_fresh_retest(first); a retest that measured nothing (the variant died,
// the context was lost) leaves no finding and no note: its verdict comes from what stopped it.
FreshInputOutcome judge_fresh_inputs(const FreshInputTimes& first, const FreshInputTimes* retest);

}  // namespace aisp
