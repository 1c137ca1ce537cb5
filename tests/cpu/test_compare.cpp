#include <gtest/gtest.h>

#include <stdexcept>

#include "core/results/compare.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

const CompareRow& row(const CompareResult& c, const std::string& variant) {
  for (const auto& r : c.rows) {
    if (r.variant == variant)
      return r;
  }
  throw std::runtime_error("no row for " + variant);
}

TEST(Compare, TwoStoredRunsVariantByVariant) {
  const CompareResult c = compare_runs(load_run(k_run_a), load_run(k_run_b));
  EXPECT_EQ(c.run_a, "20261120T090000Z_ch07-copy");
  EXPECT_EQ(c.run_b, "20261121T093000Z_ch07-copy");
  EXPECT_TRUE(c.warnings.empty());
  ASSERT_EQ(c.rows.size(), 5u);
  const auto& slowed = row(c, "ch07:copy:03_vectorized");
  ASSERT_TRUE(slowed.speedup);
  EXPECT_NEAR(slowed.speedup->ratio, 3.0837 / 6.1589, 1e-3); // median(A) / median(B)
  EXPECT_LT(slowed.speedup->interval.high, 1.0);
  EXPECT_TRUE(slowed.speedup->interval.valid);
  EXPECT_EQ(slowed.finding, "B slower");
  // The bootstrap interval is the one stats::ratio_of_medians gives on the raw samples.
  const LoadedRun a = load_run(k_run_a), b = load_run(k_run_b);
  const auto direct = stats::ratio_of_medians(a.results.targets[0].variants[2].samples_ms,
                                              b.results.targets[0].variants[2].samples_ms);
  EXPECT_DOUBLE_EQ(slowed.speedup->interval.low, direct.interval.low);
  EXPECT_DOUBLE_EQ(slowed.speedup->interval.high, direct.interval.high);
  // Verdict change PASS -> NOISY is shown, and the finding says the pair is not both PASS.
  const auto& noisy = row(c, "ch07:copy:02_coalesced");
  EXPECT_EQ(noisy.verdict_a, Verdict::pass);
  EXPECT_EQ(noisy.verdict_b, Verdict::noisy);
  EXPECT_NE(noisy.finding.find("(not both PASS)"), std::string::npos);
  EXPECT_EQ(row(c, "ch07:copy:vendor_memcpy").finding.find("B slower"), std::string::npos);
}

TEST(Compare, VariantsInOnlyOneRunAndOtherConfigurationsAreReported) {
  LoadedRun a = load_run(k_run_a), b = load_run(k_run_b);
  a.results.targets[0].variants.pop_back();                                   // vendor only in B
  b.results.targets[0].variants.erase(b.results.targets[0].variants.begin()); // 01 only in A
  b.results.targets[0].mode = CacheMode::hot;
  b.results.hardware_key = "h200";
  const CompareResult c = compare_runs(a, b);
  ASSERT_EQ(c.rows.size(), 5u);
  EXPECT_EQ(row(c, "ch07:copy:01_chunked").finding, "only in A");
  EXPECT_EQ(row(c, "ch07:copy:vendor_memcpy").finding, "only in B");
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("different hardware"), std::string::npos);
  EXPECT_NE(c.warnings[1].find("A is in cold mode, B in hot mode"), std::string::npos);
  const std::string table = render_compare(c, OutputFormat::table);
  EXPECT_NE(table.find("warning: the runs are on different hardware"), std::string::npos);
}

TEST(Compare, SelectorsAndFormats) {
  const CompareResult c =
      compare_runs(load_run(k_run_a), load_run(k_run_b), {"ch07:copy:03_vectorized"});
  ASSERT_EQ(c.rows.size(), 1u);
  const std::string table = render_compare(c, OutputFormat::table);
  EXPECT_NE(table.find("0.50"), std::string::npos) << table;
  EXPECT_NE(table.find("B slower"), std::string::npos);
  const auto j = nlohmann::json::parse(render_compare(c, OutputFormat::json));
  EXPECT_EQ(j["schema"], "aisp.compare");
  EXPECT_LT(j["rows"][0]["speedup_b_over_a"]["high"].get<double>(), 1.0);
  EXPECT_EQ(render_compare(c, OutputFormat::csv).rfind("variant,median A", 0), 0u);
  const CompareResult full = compare_runs(load_run(k_run_a), load_run(k_run_b));
  expect_golden(render_compare(full, OutputFormat::markdown), "compare_a_b.md");
}

TEST(Compare, NoSamplesMeansNotCompared) {
  LoadedRun a = load_run(k_run_a), b = load_run(k_run_b);
  b.results.targets[0].variants[0].samples_ms.clear();
  b.results.targets[0].variants[0].verdict = Verdict::error;
  const CompareResult c = compare_runs(a, b);
  EXPECT_EQ(row(c, "ch07:copy:01_chunked").finding, "not compared: no samples in B");
  EXPECT_FALSE(row(c, "ch07:copy:01_chunked").speedup);
}

// Sweeps: points match by axes; a point only one run measured is reported, not an error.
TEST(Compare, SweepPointsMatchByAxes) {
  LoadedRun a = load_run(k_run_a), b = load_run(k_run_b);
  TargetResult a_small = a.results.targets[0], b_small = b.results.targets[0], b_mid = b.results.targets[0];
  a_small.axes["n"] = 1 << 20;
  b_small.axes["n"] = 1 << 20;
  b_mid.axes["n"] = 1 << 24;
  a.results.targets.push_back(a_small);
  b.results.targets.push_back(b_small);
  b.results.targets.push_back(b_mid);
  const CompareResult c = compare_runs(a, b, {"ch07:copy:03_vectorized"});
  EXPECT_TRUE(c.has_sweeps);
  EXPECT_TRUE(c.warnings.empty()); // nothing compared across different axes
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[0].axes.at("n"), std::int64_t{1} << 30);
  EXPECT_EQ(c.rows[0].finding, "B slower");
  EXPECT_EQ(c.rows[1].axes.at("n"), 1 << 20);
  EXPECT_EQ(c.rows[1].finding, "B slower");
  EXPECT_EQ(c.rows[2].axes.at("n"), 1 << 24);
  EXPECT_EQ(c.rows[2].finding, "only in B");
  const std::string table = render_compare(c, OutputFormat::table);
  EXPECT_NE(table.find("ch07:copy:03_vectorized [n=16777216]"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(render_compare(c, OutputFormat::json));
  EXPECT_EQ(j["rows"][2]["axes"]["n"], 1 << 24);
}

// One point on each side at different axes: compared as before sweeps existed, with a warning.
TEST(Compare, OnePointEachAtOtherAxesIsComparedWithAWarning) {
  LoadedRun a = load_run(k_run_a), b = load_run(k_run_b);
  b.results.targets[0].axes["n"] = 1 << 20;
  const CompareResult c = compare_runs(a, b);
  EXPECT_FALSE(c.has_sweeps);
  ASSERT_EQ(c.rows.size(), 5u);
  EXPECT_TRUE(row(c, "ch07:copy:03_vectorized").speedup);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("other axes (A n=1073741824, B n=1048576)"), std::string::npos) << c.warnings[0];
}

} // namespace
