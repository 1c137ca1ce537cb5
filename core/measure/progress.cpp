#include "core/measure/progress.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace aisp {

namespace {

// "ch07:copy n=1024" -> "ch07:copy": target names have no spaces, the orchestrator puts one before
// the axes of a swept point.
std::string target_of(const std::string& shown) { return shown.substr(0, shown.find(' ')); }

} // namespace

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60)
    return fmt::format("{} s", s);
  if (s < 3600)
    return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

std::size_t total_variant_runs(const std::vector<ProgressPlanItem>& plan) {
  std::size_t total = 0;
  for (const auto& item : plan)
    total += item.variants * item.points;
  return total;
}

ProgressTracker::ProgressTracker(std::vector<ProgressPlanItem> plan, double max_time_s)
    : m_total(total_variant_runs(plan)) {
  for (const auto& item : plan) {
    m_points[item.target] = item.points;
    m_budget_total_s += static_cast<double>(item.variants * item.points) *
                        (item.budget_s > 0 ? item.budget_s : max_time_s);
  }
}

ProgressTracker::ProgressTracker(std::size_t total_variant_runs, double max_time_s)
    : m_total(total_variant_runs), m_budget_total_s(max_time_s * static_cast<double>(total_variant_runs)) {}

void ProgressTracker::on_event(const ProgressEvent& e, double /*now_s*/) {
  auto& seen = m_seen_points[target_of(e.target)];
  if (std::find(seen.begin(), seen.end(), e.target) == seen.end())
    seen.push_back(e.target);
  // One variant runs at every point of a sweep: its samples are counted per point.
  if (e.phase == "time")
    ++m_samples[{e.target, e.variant}];
  if (e.phase == "done")
    ++m_done;
  m_last = e;
}

std::string ProgressTracker::status_line(double now_s) const {
  std::string where;
  if (!m_last.target.empty()) {
    const std::string& v = m_last.variant;
    const std::string name = target_of(m_last.target);
    const std::string stem = v.rfind(name + ":", 0) == 0 ? v.substr(name.size() + 1) : v;
    where = fmt::format("[{}] {}: {}", m_last.target, stem.empty() ? "-" : stem, m_last.phase);
    const auto it = m_samples.find({m_last.target, v});
    if (it != m_samples.end())
      where += fmt::format(", {} samples", it->second);
    const auto planned = m_points.find(name);
    if (planned != m_points.end() && planned->second > 1) {
      const auto& seen = m_seen_points.at(name);
      const auto at = std::find(seen.begin(), seen.end(), m_last.target) - seen.begin() + 1;
      where += fmt::format(" | point {}/{}", at, planned->second);
    }
  } else {
    where = "starting";
  }
  const std::size_t left = m_total > m_done ? m_total - m_done : 0;
  std::string eta;
  if (left == 0) {
    eta = "finishing";
  } else if (m_done > 0) {
    // Measured pace: points run one after another and their variants finish together, so the mean
    // time per finished (variant, point) is a fair guide to the rest, sweep points included.
    eta = "ETA ~" + format_eta(now_s / static_cast<double>(m_done) * static_cast<double>(left));
  } else {
    eta = "sampling budget <= " + format_eta(m_budget_total_s);  // nothing done yet: the whole plan's
  }
  return fmt::format("{} | {}/{} done | {} | {}", where, m_done, m_total, format_eta(now_s), eta);
}

std::string ProgressTracker::phase_line(const ProgressEvent& e) {
  return fmt::format("[{}] {} {}", e.target, e.phase, e.variant);
}

std::string timed_sample_text(int batch, double launch_s) {
  if (batch < 1) return "";
  const std::string launches = batch == 1 ? "one launch" : fmt::format("{} launches", batch);
  if (!(launch_s > 0)) return fmt::format(", in a timed sample of {}", launches);
  if (batch == 1) return fmt::format(", in a timed sample of one launch (~{:.3g} s by the warm-up)", launch_s);
  return fmt::format(", in a timed sample of {} of ~{:.3g} s each by the warm-up (~{:.0f} s in all)", launches,
                     launch_s, batch * launch_s);
}

} // namespace aisp
