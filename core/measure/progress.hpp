// Structured progress of `aisp bench run` (one event per phase change, per timed sample and per
// verdict) and the status line a live display draws from it. Pure logic, so the ETA and the wording
// are tested without a terminal; cli/progress_display.cpp does the drawing.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace aisp {

struct ProgressEvent {
  // "ch07:copy", or "ch07:copy n=1024" for one point of a sweep (the orchestrator's display name:
  // the target's name, a space, then the point's axes).
  std::string target;
  std::string variant; // "ch07:copy:03_vectorized"
  // "setup", "validate", "warmup", "time" (one event per sample), "timed_output_check", or "done"
  // when the variant has its verdict.
  std::string phase;
  std::string verdict; // "done" only
};

// One selected target as the run will measure it: its variants at each of its axis points.
struct ProgressPlanItem {
  std::string target; // "ch07:copy"
  std::size_t variants = 0;
  std::size_t points = 1;
  double budget_s = 0;  // this target's per-variant sampling budget; 0: the tracker's max_time_s
};

// Variant runs in a plan: the sum over targets of variants x points. Every (variant, point) pair gets
// its own verdict, so this is what "done" counts up to.
std::size_t total_variant_runs(const std::vector<ProgressPlanItem>& plan);

class ProgressTracker {
public:
  // `plan`: every target of the run; `max_time_s` is the sampling budget of one variant run.
  ProgressTracker(std::vector<ProgressPlanItem> plan, double max_time_s);
  // A run whose targets are not known by name: `total_variant_runs` (variant x point) only.
  ProgressTracker(std::size_t total_variant_runs, double max_time_s);

  void on_event(const ProgressEvent& e, double now_s); // now_s: seconds since the run started

  // "[ch07:copy n=1024] 03_vectorized: time, 142 samples | point 2/9 | 12/45 done | 12 s | ETA ~20 s"
  // ("point i/N" only for a target measured at more than one point).
  std::string status_line(double now_s) const;
  // The log line the orchestrator writes for a phase event ("[ch07:copy] validate
  // ch07:copy:01_chunked"): a live display draws that in its status line instead.
  static std::string phase_line(const ProgressEvent& e);

  std::size_t done() const { return m_done; }
  std::size_t total() const { return m_total; }

private:
  std::size_t m_total;
  double m_budget_total_s = 0;  // the plan's sampling budgets summed over its (variant, point) runs
  std::size_t m_done = 0;
  ProgressEvent m_last;
  std::map<std::string, std::size_t> m_points;                  // by target name: from the plan
  std::map<std::string, std::vector<std::string>> m_seen_points; // by target name: display names
  std::map<std::pair<std::string, std::string>, std::size_t> m_samples; // by (point, variant)
};

// "45 s", "3 min 20 s", "1 h 05 min"
std::string format_eta(double seconds);

// What a worker was doing when it fell silent inside a timed sample, for the timeout's message:
// ", in a timed sample of 256 launches of ~5.8 s each by the warm-up (~1485 s in all)". launch_s 0
// (unknown) drops the times; batch < 1 gives "".
std::string timed_sample_text(int batch, double launch_s);

} // namespace aisp
