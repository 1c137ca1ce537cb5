#include "cli/progress_display.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <streambuf>
#include <string>
#include <vector>

#include "core/base/axes.hpp"
#include "core/measure/progress.hpp"
#include "core/base/registry.hpp"
#include "device/ladder.hpp"

namespace aisp::cli {

namespace {

bool stderr_is_live_terminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) == 1 && term && std::string(term) != "dumb";
}

std::size_t terminal_width() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10)
    return ws.ws_col;
  return 100;
}

// Owns the bottom line of the terminal: lasting lines are printed above it, the status is redrawn
// in it.
class LiveDisplay : public std::streambuf {
public:
  LiveDisplay(std::vector<ProgressPlanItem> plan, double max_time_s)
      : m_tracker(std::move(plan), max_time_s), m_start(std::chrono::steady_clock::now()) {}
  ~LiveDisplay() override { clear(); }

  void on_event(const ProgressEvent& e) {
    m_tracker.on_event(e, elapsed());
    // The orchestrator writes a line for this phase next; the status line says it already.
    if (e.phase != "done")
      m_swallow = ProgressTracker::phase_line(e);
    const auto now = std::chrono::steady_clock::now();
    // Samples can arrive thousands of times a second: redraw at most ten times a second.
    if (e.phase != "time" || now - m_last_draw > std::chrono::milliseconds(100))
      draw();
  }

  void clear() {
    if (m_drawn)
      std::cerr << "\r\033[K" << std::flush;
    m_drawn = false;
  }

protected:
  int overflow(int c) override {
    if (c == traits_type::eof())
      return traits_type::not_eof(c);
    if (c != '\n') {
      m_line += static_cast<char>(c);
      return c;
    }
    if (m_line != m_swallow) {
      clear();
      std::cerr << m_line << '\n';
      draw();
    }
    m_line.clear();
    return c;
  }

private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

  void draw() {
    std::string status = m_tracker.status_line(elapsed());
    const std::size_t width = terminal_width() - 1;
    if (status.size() > width)
      status.resize(width);
    std::cerr << "\r\033[K" << status << std::flush;
    m_drawn = true;
    m_last_draw = std::chrono::steady_clock::now();
  }

  ProgressTracker m_tracker;
  std::chrono::steady_clock::time_point m_start;
  std::chrono::steady_clock::time_point m_last_draw{};
  std::string m_line;
  std::string m_swallow;
  bool m_drawn = false;
};

// What the orchestrator will run (device/orchestrator.cpp make_plans): each selected target at every
// point of its axes, the requests applied as there (fixed values first, sweeps after; a request for
// an axis the target lacks is another target's). Throws UsageError as the run itself would.
std::vector<ProgressPlanItem> progress_plan(const RunOptions& options) {
  const Selection sel =
      select(LadderRegistry::instance().catalogue(), options.selectors, options.include_hidden);
  std::vector<AxisRequest> requests;
  for (const auto& [name, value] : options.axis_overrides)
    requests.push_back({name, {value}});
  for (const auto& r : options.axis_sweeps)
    requests.push_back(r);
  std::vector<ProgressPlanItem> plan;
  for (const auto& item : sel.items) {
    std::vector<AxisRequest> mine;
    for (const auto& r : requests) {
      for (const auto& a : item.target->axes) {
        if (a.name == r.first) {
          mine.push_back(r);
          break;
        }
      }
    }
    const auto points = expand_axis_points(item.target->axes, mine, item.target->name());
    plan.push_back({item.target->name(), item.variants.size(), points.size(), sampling_budget_s(options, *item.target)});
  }
  return plan;
}

} // namespace

RunOutcome run_with_progress(RunOptions options) {
  if (!stderr_is_live_terminal())
    return run_benchmarks(options, std::cerr);
  std::vector<ProgressPlanItem> plan;
  try {
    plan = progress_plan(options);
  } catch (const std::exception&) {
    return run_benchmarks(options,
                          std::cerr); // let the run report the bad selection as it always does
  }
  LiveDisplay display(std::move(plan), options.rule.max_time_s);
  std::ostream stream(&display);
  options.on_progress = [&display](const ProgressEvent& e) { display.on_event(e); };
  return run_benchmarks(options, stream); // ~LiveDisplay clears the status line, also on a throw
}

} // namespace aisp::cli
