#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/measure/progress.hpp"

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

// A target with its own sampling budget (TargetInfo::sampling_budget_s) counts at that budget.
TEST(Progress, ATargetsOwnBudgetCountsInTheFirstEstimate) {
  const std::vector<ProgressPlanItem> plan{{"ch07:copy", 5, 1}, {"ch05:file_to_gpu", 3, 1, 40.0}};
  ProgressTracker t(plan, 5.0);
  EXPECT_EQ(t.status_line(0), "starting | 0/8 done | 0 s | sampling budget <= 2 min 25 s");
}

// The ETA counts every (variant, sweep point): 5 variants at one point plus 2 variants at 9 points.
TEST(Progress, SweepPointsCountTowardsTheTotalAndTheEta) {
  const std::vector<ProgressPlanItem> plan{{"ch07:copy", 5, 1}, {"ch09:intensity", 2, 9}};
  EXPECT_EQ(total_variant_runs(plan), 23u);
  EXPECT_EQ(total_variant_runs({}), 0u);
  ProgressTracker t(plan, 2.0);
  EXPECT_EQ(t.total(), 23u);
  EXPECT_EQ(t.status_line(0), "starting | 0/23 done | 0 s | sampling budget <= 46 s");
  // An unswept target shows no point.
  t.on_event({"ch07:copy", "ch07:copy:01_a", "validate", ""}, 1);
  EXPECT_EQ(t.status_line(1),
            "[ch07:copy] 01_a: validate | 0/23 done | 1 s | sampling budget <= 46 s");
  for (const char* v : {"01_a", "02_b", "03_c", "04_d", "vendor_e"})
    t.on_event({"ch07:copy", std::string("ch07:copy:") + v, "done", "PASS"}, 5);
  // The sweep's points, by the orchestrator's display names: counted in the order they come.
  const std::string p1 = "ch09:intensity fma_per_elem=1 n=268435456";
  const std::string p2 = "ch09:intensity fma_per_elem=2 n=268435456";
  t.on_event({p1, "ch09:intensity:01_fma_chain", "time", ""}, 6);
  t.on_event({p1, "ch09:intensity:01_fma_chain", "time", ""}, 6);
  EXPECT_EQ(t.status_line(6), "[" + p1 +
                                  "] 01_fma_chain: time, 2 samples | point 1/9 | 5/23 done | 6 s | "
                                  "ETA ~22 s");
  t.on_event({p1, "ch09:intensity:01_fma_chain", "done", "PASS"}, 7);
  t.on_event({p1, "ch09:intensity:02_unrolled", "done", "PASS"}, 8);
  // The same variant at the next point starts its sample count again.
  t.on_event({p2, "ch09:intensity:01_fma_chain", "time", ""}, 10);
  // 7 of 23 done in 10 s: 16 left at 10/7 s each.
  EXPECT_EQ(t.status_line(10), "[" + p2 +
                                   "] 01_fma_chain: time, 1 samples | point 2/9 | 7/23 done | "
                                   "10 s | ETA ~23 s");
  // Back at a point already seen (a restarted worker): its number, not a new one.
  t.on_event({p1, "ch09:intensity:01_fma_chain", "setup", ""}, 11);
  EXPECT_NE(t.status_line(11).find("point 1/9"), std::string::npos);
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

TEST(Progress, TimedSampleTextSaysWhatASilentWorkerWasDoing) {
  EXPECT_EQ(timed_sample_text(256, 5.8), ", in a timed sample of 256 launches of ~5.8 s each by the warm-up (~1485 s in all)");
  EXPECT_EQ(timed_sample_text(1, 130.0), ", in a timed sample of one launch (~130 s by the warm-up)");
  EXPECT_EQ(timed_sample_text(4, 0.0), ", in a timed sample of 4 launches");
  EXPECT_EQ(timed_sample_text(0, 1.0), "");
}

} // namespace
