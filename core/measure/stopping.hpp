// The stopping rule of docs/measurement.md: when a variant has been sampled enough.
#pragma once

#include <cstddef>
#include <span>

namespace aisp {

struct StoppingRule {
  std::size_t min_samples = 10;     // never stop before this many samples
  double min_time_s = 0.2;          // ... nor before this much measured (timed) device/host time
  double max_time_s = 5.0;          // per-variant budget of wall time spent sampling
  double target_rel_ci = 0.01;      // converged when the median's 95% interval is within +-1%
  double noisy_rel_ci = 0.03;       // out of budget with an interval wider than +-3% -> NOISY
  // A variant whose budget ran out before its samples gave any valid 95% interval (fewer than 6: launches
  // of a second or more, as the serving ladders') keeps sampling until they do, up to this multiple of
  // max_time_s: without it, such a variant could only ever be NOISY at the default budget.
  double max_extension = 10.0;
  // A variant whose budget ran out with a valid interval wider than noisy_rel_ci samples on, up to this
  // multiple of max_time_s, when more samples would bring it within noisy_rel_ci by then: the median's
  // interval narrows about as 1/sqrt(samples), so the half-width projected at the limit is the present
  // one times sqrt(spent / limit). One that would not get there is NOISY at once. More samples, never a
  // looser threshold: a host-bound copy whose launches scatter by +-10% can still give a median known to
  // +-3%, and a variant whose interval will not narrow costs no more time than before.
  double max_noisy_extension = 4.0;
};

enum class StopState { keep_sampling, converged, budget_spent_ok, budget_spent_noisy };

// samples: per-launch times in seconds; measured_s: sum of the timed intervals (a batched sample counts
// its whole batch); spent_s: wall time spent sampling this variant so far.
StopState evaluate_stop(const StoppingRule& rule, std::span<const double> samples, double measured_s,
                        double spent_s);

// The per-variant sampling budget of one target: `run_s` where the user gave it (--max-time), else the
// larger of `run_s` (the default) and the ladder's own (TargetInfo::sampling_budget_s, 0 for none).
double sampling_budget_s(double run_s, bool run_s_given, double ladder_s);

// One launch's time by the warm-up: the median of the last three warm-up times, or of those there are
// (`--warmup 1` with launches of seconds ends the warm-up after one); 0 when there is none or one is not
// a positive finite number. (The harness once read three from a vector of one: two heap doubles before
// it, a denormal among them, which fits what ch15:disaggregated's "stalls" showed: samples of up to 256
// launches of 5.8 s, the worker ended as silent for 120 s.)
double warmup_launch_s(std::span<const double> warmup_s);

// Hot mode's launches per timed sample: enough back-to-back launches of launch_s (warmup_launch_s) that
// one sample lasts target_interval_s, at most max_batch; 1 for a launch already that long, and for an
// unknown (0) launch time.
int hot_batch(double launch_s, double target_interval_s, int max_batch);

}  // namespace aisp
