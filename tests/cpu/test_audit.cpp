#include <gtest/gtest.h>

#include "core/measure/audit.hpp"

namespace {

using namespace aisp;
using Kind = ActivityRecord::Kind;

// Two audited launches: windows [110, 200] and [1110, 1200] (ns), opened by the blocking kernel's end and
// closed by the end marker's start.
AuditWindowInput windows() {
  AuditWindowInput in;
  in.device = 0;
  in.harness_stream = 7;
  in.blocking_kernel_name = "blocking_kernel";
  in.end_marker_name = "audit_end_marker";
  in.records = {
      {Kind::kernel, "aisp::blocking_kernel(int*)", 100, 110, 0, 7},
      {Kind::kernel, "audit_end_marker_kernel", 200, 205, 0, 7},
      {Kind::kernel, "aisp::blocking_kernel(int*)", 1100, 1110, 0, 7},
      {Kind::kernel, "audit_end_marker_kernel", 1200, 1205, 0, 7},
  };
  return in;
}

TEST(AuditWindow, CleanLaunchesHaveNoFindings) {
  auto in = windows();
  in.records.push_back({Kind::kernel, "copy_kernel", 120, 190, 0, 7});
  in.records.push_back({Kind::kernel, "copy_kernel", 1115, 1195, 0, 9});  // side stream, inside the window
  in.records.push_back({Kind::memset, "memset", 20, 90, 0, 7});          // set-up before the first window
  EXPECT_TRUE(find_window_escapes(in).empty());
}

TEST(AuditWindow, WorkStartedWhileTheStreamWasHeldIsNotOrdered) {
  auto in = windows();
  in.records.push_back({Kind::kernel, "scale_kernel", 104, 150, 0, 9});
  const auto f = find_window_escapes(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("scale_kernel"), std::string::npos);
  EXPECT_NE(f[0].find("stream 9 (not the harness stream)"), std::string::npos) << f[0];
  EXPECT_NE(f[0].find("before the timed window opened"), std::string::npos) << f[0];
}

TEST(AuditWindow, WorkEndingAfterTheCloseEscaped) {
  auto in = windows();
  in.records.push_back({Kind::kernel, "late_kernel", 1150, 1300, 0, 9});
  in.records.push_back({Kind::memcpy, "memcpy", 250, 260, 0, 9});  // between windows: after window 1 closed
  const auto f = find_window_escapes(in);
  ASSERT_EQ(f.size(), 2u);
  for (const auto& line : f) EXPECT_NE(line.find("after the timed window closed"), std::string::npos) << line;
}

TEST(AuditWindow, AnotherDeviceIsAlwaysAFinding) {
  auto in = windows();
  in.records.push_back({Kind::kernel, "scale_kernel", 120, 150, 1, 3});
  const auto f = find_window_escapes(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("device 1"), std::string::npos) << f[0];
}

// ch02:p2p_copy's staged copy: the peer GPU's copy engine does the device-to-host half. Declared
// ("peer_gpu"), it is judged by its window only; undeclared devices stay a finding.
TEST(AuditWindow, DeclaredPeerDeviceIsJudgedByItsWindow) {
  auto in = windows();
  in.peer_devices = {1};
  in.records.push_back({Kind::memcpy, "memcpy", 120, 150, 1, 20});
  EXPECT_TRUE(find_window_escapes(in).empty());
  in.records.push_back({Kind::memcpy, "memcpy", 1150, 1300, 1, 20});  // outside its window: still a finding
  in.records.push_back({Kind::kernel, "scale_kernel", 120, 150, 2, 3});  // an undeclared device
  const auto f = find_window_escapes(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NE(f[0].find("after the timed window closed"), std::string::npos) << f[0];
  EXPECT_NE(f[1].find("device 2"), std::string::npos) << f[1];
}

TEST(AuditWindow, MissingMarkersAreReportedNotIgnored) {
  auto in = windows();
  in.records.pop_back();
  EXPECT_EQ(find_window_escapes(in).size(), 1u);
}

TEST(AuditTiming, DrainAndHostWorkThresholds) {
  EXPECT_TRUE(find_timing_escapes({0.00001, 0.002, 0.0001}).empty());
  EXPECT_EQ(find_timing_escapes({0.00001, 0.002, 0.0011}).size(), 1u);   // 1.1 ms still running after
  EXPECT_EQ(find_timing_escapes({0.0050, 0.002, 0.0}).size(), 1u);       // 5 ms of host work, 2 ms of GPU
  EXPECT_TRUE(find_timing_escapes({0.0009, 0.00001, 0.0}).empty());     // tiny kernel, launch cost < 1 ms
  EXPECT_TRUE(find_timing_escapes({0.003, 0.002, 0.0}).empty());        // under 2x the GPU time
}

}  // namespace

TEST(AuditHostWork, JudgedPerLaunchOfABatch) {
  // One launch: 3 ms on the host against 2 us of GPU time is hidden work.
  EXPECT_NE(find_host_work(3e-3, 2e-6, 1), "");
  // Within the 1 ms floor: launch overhead, not a finding.
  EXPECT_EQ(find_host_work(0.9e-3, 2e-6, 1), "");
  // 256 launches of a 1 us kernel that cost 4 us each to enqueue: 1 ms of host time in the batch, but
  // 4 us per launch, far under 1 ms: no finding (a per-batch rule would cry wolf here).
  EXPECT_EQ(find_host_work(256 * 4e-6, 256 * 1e-6, 256), "");
  // Host time up to twice the GPU time is allowed for long launches.
  EXPECT_EQ(find_host_work(9e-3, 5e-3, 1), "");
  EXPECT_NE(find_host_work(11e-3, 5e-3, 1).find("on the host"), std::string::npos);
}

TEST(AuditSchedule, ExactlyOneAuditedRoundPerDoublingWindow) {
  for (std::uint64_t seed : {1ULL, 2ULL, 0xdeadbeefULL}) {
    const AuditSchedule s(seed);
    for (int k = 0; k < 16; ++k) {
      int audited = 0;
      for (std::int64_t r = std::int64_t{1} << k; r < (std::int64_t{2} << k); ++r) audited += s.audits(r);
      EXPECT_EQ(audited, 1) << "window " << k << " seed " << seed;
      const auto chosen = s.audited_round_in_window(k);
      EXPECT_GE(chosen, std::int64_t{1} << k);
      EXPECT_LT(chosen, std::int64_t{2} << k);
    }
    EXPECT_TRUE(s.audits(1));  // the window [1, 2) has one round
    EXPECT_FALSE(s.audits(0));
  }
}

TEST(AuditSchedule, TheChoiceDependsOnTheSeed) {
  // A variant cannot predict the audited rounds: different runs draw different ones.
  int differ = 0;
  for (int k = 4; k < 12; ++k) differ += AuditSchedule(11).audited_round_in_window(k) != AuditSchedule(12).audited_round_in_window(k);
  EXPECT_GE(differ, 6);
}

TEST(FreshInputs, SlowerOnFreshInputsIsAFinding) {
  // 4x slower on inputs never seen before: a replayed answer.
  const auto f = find_state_dependence({.fresh_s = 400e-6, .seen_s = 100e-6, .noise_floor_s = 1.3e-6});
  EXPECT_NE(f.find("state kept between launches"), std::string::npos) << f;
  EXPECT_NE(f.find("4.00x"), std::string::npos) << f;
  // Within the 1.25x margin: noise, not state.
  EXPECT_EQ(find_state_dependence({.fresh_s = 120e-6, .seen_s = 100e-6, .noise_floor_s = 1.3e-6}), "");
  // Over the ratio but within 5 noise floors: a tiny kernel's jitter.
  EXPECT_EQ(find_state_dependence({.fresh_s = 8e-6, .seen_s = 4e-6, .noise_floor_s = 1.3e-6}), "");
  // Faster on fresh inputs is never a finding.
  EXPECT_EQ(find_state_dependence({.fresh_s = 50e-6, .seen_s = 100e-6, .noise_floor_s = 1.3e-6}), "");
  // Nothing measured: no finding (the caller notes why).
  EXPECT_EQ(find_state_dependence({.fresh_s = 0, .seen_s = 100e-6}), "");
}

TEST(FreshInputs, OnlyAFindingThatRecursOnTheRetestIsInvalid) {
  const FreshInputTimes honest{.fresh_s = 103e-6, .seen_s = 100e-6, .noise_floor_s = 1.3e-6};
  const FreshInputTimes transient{.fresh_s = 248e-6, .seen_s = 192e-6, .noise_floor_s = 8e-6};  // 1.29x
  const FreshInputTimes replay{.fresh_s = 124e-6, .seen_s = 50e-6, .noise_floor_s = 1.3e-6};    // 2.48x
  // Within the margin: no retest, nothing to say.
  EXPECT_FALSE(needs_fresh_retest(honest));
  EXPECT_TRUE(judge_fresh_inputs(honest, nullptr).finding.empty());
  EXPECT_TRUE(judge_fresh_inputs(honest, nullptr).note.empty());
  // Flagged once, within the margin on the retest: a note with both ratios, no finding.
  ASSERT_TRUE(needs_fresh_retest(transient));
  const auto once = judge_fresh_inputs(transient, &honest);
  EXPECT_TRUE(once.finding.empty()) << once.finding;
  EXPECT_NE(once.note.find("1.29x slower in a first round, 1.03x on a retest"), std::string::npos) << once.note;
  // Flagged twice: INVALID, the retest's finding and the first round's ratio.
  const auto twice = judge_fresh_inputs(transient, &replay);
  EXPECT_NE(twice.finding.find("state kept between launches: 2.48x"), std::string::npos) << twice.finding;
  EXPECT_NE(twice.finding.find("1.29x in the first round"), std::string::npos) << twice.finding;
  EXPECT_TRUE(twice.note.empty());
  // A retest that measured nothing decides nothing (what stopped the variant gives its verdict).
  const FreshInputTimes nothing{};
  EXPECT_TRUE(judge_fresh_inputs(transient, &nothing).finding.empty());
  EXPECT_TRUE(judge_fresh_inputs(transient, &nothing).note.empty());
  EXPECT_TRUE(judge_fresh_inputs(transient, nullptr).finding.empty());
}

TEST(FreshInputs, TheBaselineFollowsWhatATimedSampleIs) {
  EXPECT_EQ(fresh_input_baseline(CacheMode::cold, ClockKind::gpu, 1, true), FreshBaseline::timed_median);
  // Hot samples are batches, as are cold ones of several launches; without samples there is no median.
  EXPECT_EQ(fresh_input_baseline(CacheMode::hot, ClockKind::gpu, 1, true), FreshBaseline::repeat_launches);
  EXPECT_EQ(fresh_input_baseline(CacheMode::hot, ClockKind::wall, 1, true), FreshBaseline::repeat_launches);
  EXPECT_EQ(fresh_input_baseline(CacheMode::cold, ClockKind::gpu, 8, true), FreshBaseline::repeat_launches);
  EXPECT_EQ(fresh_input_baseline(CacheMode::cold, ClockKind::gpu, 1, false), FreshBaseline::repeat_launches);
  // A cold wall-clock single launch: both, the slower decides.
  EXPECT_EQ(fresh_input_baseline(CacheMode::cold, ClockKind::wall, 1, true), FreshBaseline::slower_of_both);
}

TEST(FreshInputs, SlowerOfBothIsTheSlowerSeenTime) {
  // ch13:allocator on one H200: timing loop 0.31 ms, a first launch 0.46 ms; a repeat prepared like it
  // is as slow, so the comparison is with the repeat and nothing is flagged.
  auto s = seen_time(FreshBaseline::slower_of_both, 0.31e-3, 0.44e-3);
  EXPECT_DOUBLE_EQ(s.seconds, 0.44e-3);
  EXPECT_STREQ(s.name, "repeat launches");
  EXPECT_TRUE(find_state_dependence({.fresh_s = 0.46e-3, .seen_s = s.seconds, .noise_floor_s = 10e-6}).empty());
  // ch05:file_to_gpu: a repeat of the same range read from the drive's cache; the timing loop reads new ranges.
  s = seen_time(FreshBaseline::slower_of_both, 3.5e-3, 2.6e-3);
  EXPECT_DOUBLE_EQ(s.seconds, 3.5e-3);
  EXPECT_STREQ(s.name, "timed median");
  // A replayed answer is fast both ways: still a finding.
  s = seen_time(FreshBaseline::slower_of_both, 0.05e-3, 0.047e-3);
  EXPECT_FALSE(find_state_dependence({.fresh_s = 0.12e-3, .seen_s = s.seconds, .noise_floor_s = 10e-6}).empty());
  // The single baselines take their own median, whatever the other; a missing one is never the slower.
  EXPECT_DOUBLE_EQ(seen_time(FreshBaseline::timed_median, 1e-3, 2e-3).seconds, 1e-3);
  EXPECT_DOUBLE_EQ(seen_time(FreshBaseline::repeat_launches, 1e-3, 2e-3).seconds, 2e-3);
  EXPECT_DOUBLE_EQ(seen_time(FreshBaseline::slower_of_both, 0, 2e-3).seconds, 2e-3);
  EXPECT_DOUBLE_EQ(seen_time(FreshBaseline::slower_of_both, 1e-3, 0).seconds, 1e-3);
}

TEST(AuditHostWork, OneHostStallIsNotAFindingRepeatedHostWorkIs) {
  EXPECT_FALSE(host_work_is_finding(1, 205));  // the honest 20 us kernel whose thread was descheduled once
  EXPECT_FALSE(host_work_is_finding(2, 2));
  EXPECT_TRUE(host_work_is_finding(3, 3));     // a cheat doing host work on every launch: its first 3 samples
  EXPECT_FALSE(host_work_is_finding(3, 100));  // 3% of the samples cannot move a median
  EXPECT_TRUE(host_work_is_finding(10, 100));
}
