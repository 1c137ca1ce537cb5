#include <gtest/gtest.h>

#include <stdexcept>

#include "core/results/expectations.hpp"
#include "core/results/expectations_check.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

// A median of 10 ms with a symmetric interval of +-h (relative).
TimedMedian at(double median, double h) {
  return {median, median * (1 - h), median * (1 + h)};
}

TEST(Judge, EachVerdict) {
  EXPECT_EQ(judge(at(10, 0.005), at(10.05, 0.005), 0.03).verdict, CheckVerdict::pass);
  EXPECT_EQ(judge(at(10, 0.005), at(11.0, 0.005), 0.03).verdict, CheckVerdict::regressed);
  EXPECT_EQ(judge(at(10, 0.005), at(9.0, 0.005), 0.03).verdict, CheckVerdict::improved);
  // Within the threshold, but the interval of the change reaches past it.
  EXPECT_EQ(judge(at(10, 0.01), at(10.25, 0.01), 0.03).verdict, CheckVerdict::inconclusive);
}

TEST(Judge, NumbersOfTheJudgement) {
  const Judgement j = judge(at(10, 0.03), at(12, 0.04), 0.03);
  EXPECT_NEAR(j.change, 0.2, 1e-12);
  EXPECT_NEAR(j.combined, 0.05, 1e-12); // sqrt(0.03^2 + 0.04^2)
  EXPECT_NEAR(j.limit, 0.05, 1e-12);    // max(threshold, combined)
  EXPECT_EQ(j.verdict, CheckVerdict::regressed);
}

TEST(Judge, WideIntervalsRaiseTheLimit) {
  // 8% slower is past a 3% threshold, but not past a combined interval of ~14%: not a regression.
  const Judgement j = judge(at(10, 0.1), at(10.8, 0.1), 0.03);
  EXPECT_NEAR(j.limit, std::hypot(0.1, 0.1), 1e-12);
  EXPECT_EQ(j.verdict, CheckVerdict::inconclusive);
  EXPECT_EQ(judge(at(10, 0.1), at(11.5, 0.1), 0.03).verdict, CheckVerdict::regressed);
}

TEST(Judge, BoundariesGoToTheMilderVerdict) {
  // Exact intervals (zero width): exactly the threshold passes, a hair beyond regresses.
  EXPECT_EQ(judge(at(10, 0), at(10.3, 0), 0.03).verdict, CheckVerdict::pass);
  EXPECT_EQ(judge(at(10, 0), at(10.3001, 0), 0.03).verdict, CheckVerdict::regressed);
  EXPECT_EQ(judge(at(10, 0), at(9.7, 0), 0.03).verdict, CheckVerdict::pass);
  EXPECT_EQ(judge(at(10, 0), at(9.6999, 0), 0.03).verdict, CheckVerdict::improved);
  // A change equal to the limit is not a regression; with some width it is inconclusive.
  const Judgement edge = judge(at(10, 0.03), at(10.5, 0.04), 0.03); // change 5% = combined 5%
  EXPECT_EQ(edge.verdict, CheckVerdict::inconclusive);
  // Threshold 0: any certain change is a regression or an improvement; identical medians pass.
  EXPECT_EQ(judge(at(10, 0), at(10, 0), 0.0).verdict, CheckVerdict::pass);
  EXPECT_EQ(judge(at(10, 0), at(10.01, 0), 0.0).verdict, CheckVerdict::regressed);
}

TEST(Judge, AsymmetricIntervalsUseTheirWiderSide) {
  const Judgement j = judge({10, 9.9, 10.4}, {10, 9.7, 10.1}, 0.03);
  EXPECT_NEAR(j.combined, std::hypot(0.04, 0.03), 1e-12);
}

TEST(Judge, RejectsNonsense) {
  EXPECT_THROW(judge(at(0, 0), at(1, 0), 0.03), std::invalid_argument);
  EXPECT_THROW(judge(at(1, 0), at(-1, 0), 0.03), std::invalid_argument);
  EXPECT_THROW(judge(at(1, 0), at(1, 0), -0.1), std::invalid_argument);
}

const CheckRow& row(const CheckReport& r, const std::string& variant) {
  for (const auto& x : r.rows) {
    if (x.variant == variant)
      return x;
  }
  throw std::runtime_error("no row for " + variant);
}

class CheckRun : public ::testing::Test {
protected:
  void SetUp() override {
    chapters = make_chapters(dir);
    ASSERT_TRUE(update_expectations(load_run(k_run_a), chapters)[0].written);
  }
  ScratchDir dir;
  std::string chapters;
};

// Numbers of the two L2 flushes are never compared: a read-flush run against stored write-flush
// expectations (everything stored before the flush was recorded) is NOT-COMPARABLE, saying why.
TEST_F(CheckRun, AnotherL2FlushIsNotComparedButSaysWhy) {
  // The fixture's expectations, re-written as measured with the write flush.
  LoadedRun old_run = load_run(k_run_a);
  old_run.results.targets[0].l2_flush = L2Flush::write;
  ScratchDir legacy_dir;
  const std::string legacy = make_chapters(legacy_dir);
  ASSERT_TRUE(update_expectations(old_run, legacy)[0].written);
  const CheckReport r = check_run(load_run(k_run_b), legacy, {}, k_default_check_threshold);
  ASSERT_FALSE(r.rows.empty());
  for (const auto& x : r.rows) {
    EXPECT_EQ(x.verdict, CheckVerdict::not_comparable) << x.variant;
    EXPECT_NE(x.reason.find("this run is in cold mode, the expectations were measured in cold (write flush) mode"),
              std::string::npos)
        << x.reason;
  }
  EXPECT_EQ(check_exit_code(r, false), ExitCode::ok);
}

TEST_F(CheckRun, TheSlowedVariantRegressesAndTheRestPass) {
  const CheckReport r = check_run(load_run(k_run_b), chapters, {}, k_default_check_threshold);
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(row(r, "ch07:copy:03_vectorized").verdict, CheckVerdict::regressed);
  EXPECT_NE(row(r, "ch07:copy:03_vectorized").reason.find("slower by +99."), std::string::npos)
      << row(r, "ch07:copy:03_vectorized").reason;
  EXPECT_EQ(row(r, "ch07:copy:01_chunked").verdict, CheckVerdict::pass);
  EXPECT_EQ(row(r, "ch07:copy:04_in_flight").verdict, CheckVerdict::pass);
  EXPECT_EQ(row(r, "ch07:copy:vendor_memcpy").verdict, CheckVerdict::pass);
  // NOISY in this run: not compared, with the reason.
  EXPECT_EQ(row(r, "ch07:copy:02_coalesced").verdict, CheckVerdict::not_comparable);
  EXPECT_NE(row(r, "ch07:copy:02_coalesced").reason.find("NOISY"), std::string::npos);
  EXPECT_EQ(check_exit_code(r, false), ExitCode::regression);
}

TEST_F(CheckRun, TheSameRunPassesAndExitsZero) {
  const CheckReport r = check_run(load_run(k_run_a), chapters, {}, k_default_check_threshold);
  EXPECT_EQ(r.count(CheckVerdict::pass), 5u);
  EXPECT_EQ(check_exit_code(r, true), ExitCode::ok);
}

TEST_F(CheckRun, AFasterRunSaysTheExpectationIsStale) {
  LoadedRun fast = load_run(k_run_a);
  auto& v = fast.results.targets[0].variants[0]; // 01_chunked, ~24.8 ms
  for (double& s : v.samples_ms)
    s *= 0.8;
  derive_statistics(fast.results.targets[0]);
  const CheckReport r =
      check_run(fast, chapters, {"ch07:copy:01_chunked"}, k_default_check_threshold);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, CheckVerdict::improved);
  EXPECT_NE(r.rows[0].reason.find("stale"), std::string::npos);
  EXPECT_EQ(check_exit_code(r, false), ExitCode::ok);
}

TEST_F(CheckRun, ThresholdOptionMovesTheLine) {
  // Half again as much slowdown tolerated: the doubled variant still regresses; with 150% it
  // passes.
  EXPECT_EQ(row(check_run(load_run(k_run_b), chapters, {}, 0.5), "ch07:copy:03_vectorized").verdict,
            CheckVerdict::regressed);
  EXPECT_EQ(row(check_run(load_run(k_run_b), chapters, {}, 1.5), "ch07:copy:03_vectorized").verdict,
            CheckVerdict::pass);
}

TEST_F(CheckRun, NotComparableCasesEachSayWhy) {
  // `lenient`: the exit code without --strict (a variant failing in the run exits 1 either way).
  const auto reason_of = [&](const LoadedRun& run, const std::string& variant,
                             ExitCode lenient = ExitCode::ok) {
    const CheckReport r = check_run(run, chapters, {}, k_default_check_threshold);
    EXPECT_EQ(row(r, variant).verdict, CheckVerdict::not_comparable);
    EXPECT_EQ(check_exit_code(r, false), lenient);
    EXPECT_EQ(check_exit_code(r, true), lenient == ExitCode::ok ? ExitCode::regression : lenient);
    return row(r, variant).reason;
  };
  LoadedRun other_hw = load_run(k_run_a);
  other_hw.results.hardware_key = "h200";
  EXPECT_NE(reason_of(other_hw, "ch07:copy:01_chunked")
                .find("no expectations for hardware h200 (stored for: h100_sxm)"),
            std::string::npos);

  LoadedRun hot = load_run(k_run_a);
  hot.results.targets[0].mode = CacheMode::hot;
  EXPECT_NE(reason_of(hot, "ch07:copy:01_chunked").find("hot mode"), std::string::npos);

  LoadedRun small = load_run(k_run_a);
  small.results.targets[0].axes["n"] = 1 << 20;
  EXPECT_NE(reason_of(small, "ch07:copy:01_chunked").find("other axes: this run has n=1048576"),
            std::string::npos);

  LoadedRun renamed = load_run(k_run_a);
  renamed.results.targets[0].variants[3].name = "ch07:copy:05_new";
  EXPECT_EQ(reason_of(renamed, "ch07:copy:05_new"), "no stored expectation for this variant");
  // ... and the stored 04_in_flight that this run did not measure is reported, not dropped.
  EXPECT_NE(reason_of(renamed, "ch07:copy:04_in_flight").find("not measured in this run"),
            std::string::npos);

  LoadedRun failed = load_run(k_run_a);
  failed.results.targets[0].variants[1].verdict = Verdict::fail;
  failed.results.targets[0].variants[1].reason = "2 of 1073741824 elements out of tolerance";
  EXPECT_NE(reason_of(failed, "ch07:copy:02_coalesced", ExitCode::verdict_failure)
                .find("FAIL in this run: 2 of"),
            std::string::npos);
}

TEST_F(CheckRun, MissingOrCorruptFilesAreNotComparableWithTheFileNamed) {
  const std::string path = chapters + "/ch07_memory_access/copy/expectations_h100_sxm.json";
  spit(path, "{ corrupt");
  CheckReport r = check_run(load_run(k_run_a), chapters, {}, k_default_check_threshold);
  ASSERT_EQ(r.rows.size(), 5u);
  for (const auto& x : r.rows) {
    EXPECT_EQ(x.verdict, CheckVerdict::not_comparable);
    EXPECT_NE(x.reason.find(path), std::string::npos) << x.reason;
  }
  EXPECT_EQ(slurp(path), "{ corrupt");
  std::filesystem::remove(path);
  r = check_run(load_run(k_run_a), chapters, {}, k_default_check_threshold);
  EXPECT_NE(r.rows[0].reason.find("no expectations file"), std::string::npos);
  r = check_run(load_run(k_run_a), dir / "nowhere", {}, k_default_check_threshold);
  EXPECT_EQ(r.rows.size(), 5u);
  EXPECT_NE(r.rows[0].reason.find("does not exist"), std::string::npos);
}

TEST_F(CheckRun, RenderedFormats) {
  const CheckReport r = check_run(load_run(k_run_b), chapters, {}, k_default_check_threshold);
  const std::string table = render_check(r, OutputFormat::table);
  EXPECT_NE(table.find("REGRESSED"), std::string::npos);
  EXPECT_NE(
      table.find(
          "3 PASS, 1 REGRESSED, 0 IMPROVED, 0 INCONCLUSIVE, 1 NOT-COMPARABLE, 0 MACHINE-DRIFT "
          "(threshold 3.0%)\nexit 4: 1 REGRESSED\n"),
      std::string::npos)
      << table;
  const auto j = nlohmann::json::parse(render_check(r, OutputFormat::json));
  EXPECT_EQ(j["schema"], "aisp.check");
  EXPECT_EQ(j["summary"]["REGRESSED"], 1);
  EXPECT_EQ(j["rows"].size(), 5u);
  const std::string csv = render_check(r, OutputFormat::csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);
}

// Sweeps: each measured point is checked against the stored configuration at the same axes; stored
// points the run did not measure are notes, never verdicts.
TEST_F(CheckRun, SweepPointsAreCheckedAgainstTheirOwnConfiguration) {
  LoadedRun sweep = load_run(k_run_a);
  TargetResult small = sweep.results.targets[0];
  small.axes["n"] = 1 << 20;
  sweep.results.targets.push_back(small);
  ASSERT_TRUE(update_expectations(sweep, chapters)[0].written); // now n=2^20 and n=2^30 are stored

  // B at both points: 03 regresses at each, with the point's axes on its row.
  LoadedRun b = load_run(k_run_b);
  TargetResult b_small = b.results.targets[0];
  b_small.axes["n"] = 1 << 20;
  b.results.targets.push_back(b_small);
  CheckReport r = check_run(b, chapters, {"ch07:copy:03_vectorized"}, k_default_check_threshold);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].axes.at("n"), std::int64_t{1} << 30);
  EXPECT_EQ(r.rows[1].axes.at("n"), 1 << 20);
  EXPECT_EQ(r.count(CheckVerdict::regressed), 2u);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_TRUE(r.has_sweeps());
  EXPECT_NE(render_check(r, OutputFormat::table).find("ch07:copy:03_vectorized [n=1048576]"), std::string::npos);

  // A at one point only: clean, and the other stored point is a note.
  LoadedRun one = load_run(k_run_a);
  one.results.targets[0].axes["n"] = 1 << 20;
  r = check_run(one, chapters, {}, k_default_check_threshold);
  EXPECT_EQ(r.count(CheckVerdict::pass), 5u);
  EXPECT_EQ(check_exit_code(r, true), ExitCode::ok);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("(mode cold, gpu clock, n=1073741824) was not measured"), std::string::npos) << r.notes[0];
  EXPECT_NE(render_check(r, OutputFormat::table).find("note: ch07:copy: the stored configuration"), std::string::npos);

  // A point the file does not hold: NOT-COMPARABLE, listing what is stored.
  LoadedRun other = load_run(k_run_a);
  other.results.targets[0].axes["n"] = 1 << 24;
  r = check_run(other, chapters, {"ch07:copy:01_chunked"}, k_default_check_threshold);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, CheckVerdict::not_comparable);
  EXPECT_NE(r.rows[0].reason.find("no stored configuration (mode cold, gpu clock, n=16777216); stored: (mode cold, gpu "
                                  "clock, n=1048576), (mode cold, gpu clock, n=1073741824)"),
            std::string::npos)
      << r.rows[0].reason;
}

} // namespace
