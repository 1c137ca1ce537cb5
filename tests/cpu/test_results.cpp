#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/render.hpp"
#include "core/results.hpp"

namespace {

using namespace aisp;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string k_golden = std::string(AISP_TEST_DATA_DIR) + "/golden/results_v1.json";

TEST(ResultsJson, GoldenFileRoundTripsByteForByte) {
  const std::string text = read_file(k_golden);
  ASSERT_FALSE(text.empty()) << "missing " << k_golden;
  const RunResults r = run_results_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(to_json(r).dump(2) + "\n", text);
}

TEST(ResultsJson, GoldenFileContents) {
  const RunResults r = run_results_from_json(nlohmann::json::parse(read_file(k_golden)));
  ASSERT_EQ(r.targets.size(), 1u);
  const auto& t = r.targets[0];
  EXPECT_EQ(t.name, "ch07:copy");
  ASSERT_EQ(t.variants.size(), 3u);
  EXPECT_EQ(t.variants[0].verdict, Verdict::pass);
  EXPECT_EQ(t.variants[1].verdict, Verdict::fail);
  ASSERT_TRUE(t.variants[1].validation);
  EXPECT_EQ(t.variants[1].validation->failed_check, "mismatch");
  EXPECT_EQ(t.variants[1].validation->first_mismatches.size(), 2u);
  EXPECT_EQ(t.variants[2].kind, VariantKind::vendor);
}

TEST(ResultsJson, RejectsOtherDocumentsAndNewerSchemas) {
  EXPECT_THROW(run_results_from_json(nlohmann::json::parse(R"({"a":1})")), DataError);
  auto j = nlohmann::json::parse(read_file(k_golden));
  j["schema_version"] = k_results_schema_version + 1;
  EXPECT_THROW(run_results_from_json(j), DataError);
  j = nlohmann::json::parse(read_file(k_golden));
  j["targets"][0]["variants"][0]["verdict"] = "GREAT";
  EXPECT_THROW(run_results_from_json(j), DataError);
  j = nlohmann::json::parse(read_file(k_golden));
  j["targets"][0].erase("mode");
  EXPECT_THROW(run_results_from_json(j), DataError);
}

VariantResult pass_with(const std::string& name, VariantKind kind, std::vector<double> samples) {
  VariantResult v;
  v.name = name;
  v.kind = kind;
  v.verdict = Verdict::pass;
  v.samples_ms = std::move(samples);
  return v;
}

TEST(DeriveStatistics, ThroughputSpeedupAndVendorFraction) {
  TargetResult t;
  t.name = "ch07:copy";
  t.bytes_per_launch = 8e9;
  t.baseline = "ch07:copy:01_a";
  t.vendor = "ch07:copy:vendor_b";
  t.variants.push_back(pass_with("ch07:copy:01_a", VariantKind::baseline, {4.0, 4.0, 4.1, 3.9, 4.0, 4.0, 4.0, 4.0}));
  t.variants.push_back(pass_with("ch07:copy:02_c", VariantKind::step, {2.0, 2.0, 2.05, 1.95, 2.0, 2.0, 2.0, 2.0}));
  t.variants.push_back(pass_with("ch07:copy:vendor_b", VariantKind::vendor, {1.9, 1.9, 1.9, 1.9, 1.91, 1.89, 1.9, 1.9}));
  auto failed = pass_with("ch07:copy:03_f", VariantKind::step, {1.0, 1.0});
  failed.verdict = Verdict::fail;
  t.variants.push_back(failed);
  derive_statistics(t);
  const auto& c = t.variants[1];
  ASSERT_TRUE(c.stats);
  EXPECT_DOUBLE_EQ(c.stats->median, 2.0);
  EXPECT_NEAR(c.gb_per_s, 4000.0, 1e-9);  // 8 GB in 2 ms
  ASSERT_TRUE(c.speedup_vs_baseline);
  EXPECT_NEAR(c.speedup_vs_baseline->value, 2.0, 1e-12);
  EXPECT_TRUE(c.speedup_vs_baseline->significant);
  ASSERT_TRUE(c.fraction_of_vendor);
  EXPECT_NEAR(c.fraction_of_vendor->value, 0.95, 1e-12);
  EXPECT_FALSE(t.variants[0].speedup_vs_baseline) << "the baseline is not compared with itself";
  EXPECT_FALSE(t.variants[3].speedup_vs_baseline) << "no speedups for a FAIL";
}

TEST(DeriveStatistics, UnderTheNoiseFloorIsNeverSignificant) {
  TargetResult t;
  t.baseline = "a";
  t.variants.push_back(pass_with("a", VariantKind::baseline, {0.004, 0.004, 0.004, 0.004, 0.004, 0.004}));
  t.variants.push_back(pass_with("b", VariantKind::step, {0.002, 0.002, 0.002, 0.002, 0.002, 0.002}));
  derive_statistics(t, /*noise_floor_ms=*/0.001);
  ASSERT_TRUE(t.variants[1].speedup_vs_baseline);
  EXPECT_FALSE(t.variants[1].speedup_vs_baseline->significant);
}

TEST(Render, TableShowsNoSignificantDifference) {
  RunResults r;
  TargetResult t;
  t.name = "x:y";
  t.baseline = "x:y:01_a";
  t.bytes_per_launch = 1e9;
  t.variants.push_back(pass_with("x:y:01_a", VariantKind::baseline, {1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0}));
  t.variants.push_back(pass_with("x:y:02_b", VariantKind::step, {1.0, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0}));
  derive_statistics(t);
  r.targets.push_back(t);
  const std::string table = render_results(r, OutputFormat::table);
  EXPECT_NE(table.find("no significant difference"), std::string::npos) << table;
  EXPECT_NE(table.find("PASS"), std::string::npos);
  const std::string csv = render_results(r, OutputFormat::csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  const std::string md = render_results(r, OutputFormat::markdown);
  EXPECT_NE(md.find("| --- |"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(render_results(r, OutputFormat::json))["schema"], "aisp.results");
}

TEST(Render, DurationUnits) {
  EXPECT_EQ(format_duration_ms(0.0005), "500 ns");
  EXPECT_EQ(format_duration_ms(0.0123), "12.30 us");
  EXPECT_EQ(format_duration_ms(2.9041), "2.904 ms");
  EXPECT_EQ(format_duration_ms(1500), "1.50 s");
}

}  // namespace
