#include <gtest/gtest.h>

#include "core/progress.hpp"

namespace {

using namespace aisp;

TEST(Progress, StatusLineCountsSamplesAndEstimates) {
  ProgressTracker t(4, 5.0);
  EXPECT_EQ(t.status_line(0), "starting | 0/4 done | 0 s | sampling budget <= 20 s");
  t.on_event({"ch07:copy", "ch07:copy:01_a", "validate", ""}, 1);
  EXPECT_EQ(t.status_line(1),
            "[ch07:copy] 01_a: validate | 0/4 done | 1 s | sampling budget <= 20 s");
  for (int i = 0; i < 3; ++i)
    t.on_event({"ch07:copy", "ch07:copy:01_a", "time", ""}, 2);
  t.on_event({"ch07:copy", "ch07:copy:02_b", "time", ""}, 2);
  t.on_event({"ch07:copy", "ch07:copy:01_a", "time", ""}, 2);
  EXPECT_EQ(t.status_line(2),
            "[ch07:copy] 01_a: time, 4 samples | 0/4 done | 2 s | sampling budget <= 20 s");
  t.on_event({"ch07:copy", "ch07:copy:01_a", "done", "PASS"}, 10);
  // One of four done after 10 s: about 30 s to go.
  EXPECT_EQ(t.status_line(10), "[ch07:copy] 01_a: done, 4 samples | 1/4 done | 10 s | ETA ~30 s");
  EXPECT_EQ(t.done(), 1u);
  for (const char* v : {"02_b", "03_c", "04_d"})
    t.on_event({"ch07:copy", std::string("ch07:copy:") + v, "done", "PASS"}, 20);
  EXPECT_NE(t.status_line(20).find("4/4 done | 20 s | finishing"), std::string::npos);
}

TEST(Progress, PhaseLineMatchesTheOrchestratorsLogLine) {
  EXPECT_EQ(ProgressTracker::phase_line({"ch07:copy", "ch07:copy:01_a", "warmup", ""}),
            "[ch07:copy] warmup ch07:copy:01_a");
}

TEST(Progress, EtaFormat) {
  EXPECT_EQ(format_eta(-3), "0 s");
  EXPECT_EQ(format_eta(59.4), "59 s");
  EXPECT_EQ(format_eta(200), "3 min 20 s");
  EXPECT_EQ(format_eta(3900), "1 h 05 min");
}

} // namespace
