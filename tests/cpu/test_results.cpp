#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/results/render.hpp"
#include "core/results/results.hpp"

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

// key_axes (added after schema 1 was first written): written when known, read back; absent in older runs,
// whose files keep round-tripping unchanged (the golden file above has none).
TEST(ResultsJson, KeyAxesAreOptionalAndRoundTrip) {
  RunResults r = run_results_from_json(nlohmann::json::parse(read_file(k_golden)));
  EXPECT_TRUE(r.targets[0].key_axes.empty());
  EXPECT_FALSE(to_json(r)["targets"][0].contains("key_axes"));
  r.targets[0].key_axes = {"n", "gather"};
  const auto j = to_json(r);
  EXPECT_EQ(j["targets"][0]["key_axes"], nlohmann::ordered_json::parse(R"(["n", "gather"])"));
  EXPECT_EQ(run_results_from_json(nlohmann::json::parse(j.dump())).targets[0].key_axes,
            (std::vector<std::string>{"n", "gather"}));
  auto bad = nlohmann::json::parse(j.dump());
  bad["targets"][0]["key_axes"] = "n";
  EXPECT_THROW(run_results_from_json(bad), DataError);
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

TEST(Render, ASpeedupNotCalledSaysWhy) {
  RunResults r;
  TargetResult t;
  t.name = "x:y";
  t.baseline = "x:y:01_a";
  t.bytes_per_launch = 1e6;
  t.noise_floor_ms = 0.001;  // 1 us: the baseline's 4 us is under 10x the floor
  t.variants.push_back(pass_with("x:y:01_a", VariantKind::baseline, {0.004, 0.004, 0.004, 0.004, 0.004, 0.004}));
  t.variants.push_back(pass_with("x:y:02_b", VariantKind::step, {0.002, 0.002, 0.002, 0.002, 0.002, 0.002}));
  derive_statistics(t, t.noise_floor_ms);
  r.targets.push_back(t);
  const std::string table = render_results(r, OutputFormat::table);
  EXPECT_NE(table.find("2.00x [2.00, 2.00] not called: under 10x the noise floor"), std::string::npos) << table;
  EXPECT_EQ(table.find("no significant difference"), std::string::npos) << "its interval excludes 1: " << table;
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

// --- variant facts (VariantBase::facts: registers, occupancy) ---

TEST(ResultsJson, FactsRoundTripAndAreOmittedWhenEmpty) {
  const RunResults r = run_results_from_json(nlohmann::json::parse(read_file(k_golden)));
  const auto& a = r.targets[0].variants[0];
  ASSERT_EQ(a.facts.size(), 5u);
  EXPECT_EQ(a.facts[0], (std::pair<std::string, std::string>{"blocks_per_sm", "8"}));  // sorted by name
  EXPECT_TRUE(r.targets[0].variants[1].facts.empty());
  // Absent when empty, so results of variants without facts keep their exact form.
  EXPECT_FALSE(to_json(r.targets[0].variants[1]).contains("facts"));
  // Written in any order, read back sorted: a second write is the same bytes.
  VariantResult v = a;
  v.facts = {{"regs", "64"}, {"occupancy_pct", "75.0"}, {"spill_bytes", "0"}};
  const auto once = to_json(v).dump();
  const VariantResult back = variant_result_from_json(nlohmann::json::parse(once));
  EXPECT_EQ(to_json(back).dump(), once);
  EXPECT_EQ(back.facts.front().first, "occupancy_pct");
  // A number where a string is expected still reads (as its JSON text).
  auto j = nlohmann::json::parse(once);
  j["facts"]["regs"] = 64;
  EXPECT_EQ(variant_result_from_json(j).facts.at(1), (std::pair<std::string, std::string>{"regs", "64"}));
}

TEST(Render, FactsAreOneShortCellInAFixedOrder) {
  EXPECT_EQ(format_facts({}), "");
  EXPECT_EQ(format_facts({{"occupancy_pct", "75.0"}, {"regs", "64"}, {"local_bytes", "0"}, {"smem_bytes", "0"},
                          {"blocks_per_sm", "4"}}),
            "regs 64 \u00b7 occ 75% \u00b7 4 blk/SM");
  EXPECT_EQ(format_facts({{"regs", "255"}, {"local_bytes", "48"}, {"smem_bytes", "49152"}, {"tile", "128x128"}}),
            "regs 255 \u00b7 local 48 B \u00b7 smem 49152 B \u00b7 tile 128x128");
}

TEST(Render, FactsColumnOnlyForTargetsWithFacts) {
  const RunResults r = run_results_from_json(nlohmann::json::parse(read_file(k_golden)));
  const std::string table = render_results(r, OutputFormat::table);
  EXPECT_NE(table.find(" facts "), std::string::npos) << table;  // the column ("artifacts" is in the heading)
  EXPECT_NE(table.find("regs 16 \u00b7 occ 100% \u00b7 8 blk/SM"), std::string::npos) << table;
  const std::string md = render_results(r, OutputFormat::markdown);
  EXPECT_NE(md.find("| facts |"), std::string::npos) << md;
  const std::string csv = render_results(r, OutputFormat::csv);
  EXPECT_NE(csv.find(",facts\n"), std::string::npos);
  EXPECT_NE(csv.find("blocks_per_sm=8;local_bytes=0;occupancy_pct=100.0;regs=16;smem_bytes=0"), std::string::npos);
  RunResults none = r;
  for (auto& v : none.targets[0].variants) v.facts.clear();
  EXPECT_EQ(render_results(none, OutputFormat::table).find(" facts "), std::string::npos);
  // Columns stay aligned although the separator is two bytes: the verdict starts at the same display
  // column (UTF-8 continuation bytes take none) on every variant's line.
  const auto column_of_verdict = [](const std::string& line) {
    std::size_t at = std::string::npos;
    for (const char* v : {"PASS", "FAIL"}) at = std::min(at, line.find(v));
    std::size_t col = 0;
    for (std::size_t i = 0; i < at; ++i) col += (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80;
    return col;
  };
  std::vector<std::size_t> columns;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("01_chunked", 0) == 0 || line.rfind("02_wrong", 0) == 0 || line.rfind("vendor_memcpy", 0) == 0) {
      columns.push_back(column_of_verdict(line));
    }
  }
  ASSERT_EQ(columns.size(), 3u) << table;
  EXPECT_EQ(columns[0], columns[1]) << table;
  EXPECT_EQ(columns[0], columns[2]) << table;
}

// --- axis sweeps ---

TEST(Render, EachAxisPointIsItsOwnTableWithItsAxesInTheHeading) {
  RunResults r = run_results_from_json(nlohmann::json::parse(read_file(k_golden)));
  TargetResult second = r.targets[0];
  second.axes["n"] = 1 << 20;
  r.targets.push_back(second);
  const std::string table = render_results(r, OutputFormat::table);
  EXPECT_NE(table.find("ch07:copy (cold L2, gpu clock; n=1073741824;"), std::string::npos) << table;
  EXPECT_NE(table.find("ch07:copy (cold L2, gpu clock; n=1048576;"), std::string::npos) << table;
  // Round trip: both points stay distinct TargetResults of the same name.
  const RunResults back = run_results_from_json(nlohmann::json::parse(to_json(r).dump()));
  ASSERT_EQ(back.targets.size(), 2u);
  EXPECT_EQ(back.targets[0].name, back.targets[1].name);
  EXPECT_NE(back.targets[0].axes, back.targets[1].axes);
}

TEST(Render, CatalogueShowsTheDefaultSweep) {
  TargetInfo t;
  t.chapter = "ch10";
  t.ladder = "gemm";
  t.summary = "a GEMM";
  t.axes = {{"size", 4096, "matrix size", 1, 256, {4096, 8192}}, {"k", 64, "depth", 1, 0, {}}};
  const std::string text = render_catalogue({&t}, OutputFormat::table);
  EXPECT_NE(text.find("axis size=4096,8192  matrix size (swept unless --axis sets it)"), std::string::npos) << text;
  EXPECT_NE(text.find("axis k=64  depth\n"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(render_catalogue({&t}, OutputFormat::json));
  EXPECT_EQ(j[0]["axes"][0]["default_sweep"], nlohmann::json::parse("[4096, 8192]"));
  EXPECT_EQ(j[0]["axes"][0]["omit_at_default"], false);
}

TEST(Render, CatalogueSaysWhichAxesAreLeftOutOfTheKeyAtTheirDefault) {
  TargetInfo t;
  t.chapter = "ch10";
  t.ladder = "gemm";
  t.summary = "a GEMM";
  t.axes = {{.name = "size", .default_value = 4096, .help = "matrix size"},
            {.name = "shape", .default_value = 0, .help = "GEMM shape", .min_value = 0, .omit_at_default = true}};
  const std::string text = render_catalogue({&t}, OutputFormat::table);
  EXPECT_NE(text.find("axis shape=0  GEMM shape (left out of the key at its default)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("axis size=4096  matrix size\n"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(render_catalogue({&t}, OutputFormat::json));
  EXPECT_EQ(j[0]["axes"][1]["omit_at_default"], true);
  EXPECT_EQ(j[0]["axes"][0]["omit_at_default"], false);
}

}  // namespace
