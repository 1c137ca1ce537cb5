#include "core/progress.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace aisp {

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60)
    return fmt::format("{} s", s);
  if (s < 3600)
    return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

ProgressTracker::ProgressTracker(std::size_t total_variants, double max_time_s)
    : m_total(total_variants), m_max_time_s(max_time_s) {}

void ProgressTracker::on_event(const ProgressEvent& e, double /*now_s*/) {
  if (e.phase == "time")
    ++m_samples[e.variant];
  if (e.phase == "done")
    ++m_done;
  m_last = e;
}

std::string ProgressTracker::status_line(double now_s) const {
  std::string where;
  if (!m_last.target.empty()) {
    const std::string& v = m_last.variant;
    const std::string stem =
        v.rfind(m_last.target + ":", 0) == 0 ? v.substr(m_last.target.size() + 1) : v;
    where = fmt::format("[{}] {}: {}", m_last.target, stem.empty() ? "-" : stem, m_last.phase);
    const auto it = m_samples.find(v);
    if (it != m_samples.end())
      where += fmt::format(", {} samples", it->second);
  } else {
    where = "starting";
  }
  const std::size_t left = m_total > m_done ? m_total - m_done : 0;
  std::string eta;
  if (left == 0) {
    eta = "finishing";
  } else if (m_done > 0) {
    // Measured pace: targets run one after another and their variants finish together, so the mean
    // time per finished variant is a fair guide to the rest.
    eta = "ETA ~" + format_eta(now_s / static_cast<double>(m_done) * static_cast<double>(left));
  } else {
    eta = "sampling budget <= " + format_eta(m_max_time_s * static_cast<double>(left));
  }
  return fmt::format("{} | {}/{} done | {} | {}", where, m_done, m_total, format_eta(now_s), eta);
}

std::string ProgressTracker::phase_line(const ProgressEvent& e) {
  return fmt::format("[{}] {} {}", e.target, e.phase, e.variant);
}

} // namespace aisp
