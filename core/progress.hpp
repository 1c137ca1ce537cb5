// Structured progress of `aisp bench run` (one event per phase change, per timed sample and per
// verdict) and the status line a live display draws from it. Pure logic, so the ETA and the wording
// are tested without a terminal; cli/progress_display.cpp does the drawing.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace aisp {

struct ProgressEvent {
  std::string target;  // "ch07:copy"
  std::string variant; // "ch07:copy:03_vectorized"
  // "setup", "validate", "warmup", "time" (one event per sample), "timed_output_check", or "done"
  // when the variant has its verdict.
  std::string phase;
  std::string verdict; // "done" only
};

class ProgressTracker {
public:
  // `total_variants` over all targets; `max_time_s` is the sampling budget of one variant.
  ProgressTracker(std::size_t total_variants, double max_time_s);

  void on_event(const ProgressEvent& e, double now_s); // now_s: seconds since the run started

  // "[ch07:copy] 03_vectorized: time, 142 samples | 2/5 done | 12 s | ETA ~20 s"
  std::string status_line(double now_s) const;
  // The log line the orchestrator writes for a phase event ("[ch07:copy] validate
  // ch07:copy:01_chunked"): a live display draws that in its status line instead.
  static std::string phase_line(const ProgressEvent& e);

  std::size_t done() const { return m_done; }

private:
  std::size_t m_total;
  double m_max_time_s;
  std::size_t m_done = 0;
  ProgressEvent m_last;
  std::map<std::string, std::size_t> m_samples; // by variant
};

// "45 s", "3 min 20 s", "1 h 05 min"
std::string format_eta(double seconds);

} // namespace aisp
