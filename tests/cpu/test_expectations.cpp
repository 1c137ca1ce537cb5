#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/base/error.hpp"
#include "core/report/report_markdown.hpp"
#include "core/results/expectations.hpp"
#include "core/base/registry.hpp"
#include "core/results/results.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;
namespace fs = std::filesystem;

Expectations small_expectations() {
  Expectations e;
  e.target = "ch07:copy";
  e.hardware_key = "h100_sxm";
  e.mode = "cold";
  e.clock = "gpu";
  e.axes = {{"n", 1024}};
  VariantExpectation v;
  v.name = "ch07:copy:02_b";
  v.kind = "step";
  v.median_ms = 1.23456789;
  v.ci_low_ms = 1.2;
  v.ci_high_ms = 1.3;
  v.samples = 40;
  v.gb_per_s = 2345.678912;
  v.speedup_vs_baseline = SpeedupExpectation{2.5, 2.4, 2.6};
  v.fraction_of_vendor = SpeedupExpectation{0.812345678, 0.8, 0.825};
  v.provenance = {"run1", "2026-11-20T09:00:00Z", "abc", "false", "GPU", 13000, 13000, "as found",
                  "cold"};
  VariantExpectation w = v;
  w.name = "ch07:copy:01_a";
  w.kind = "baseline";
  w.speedup_vs_baseline.reset();
  w.fraction_of_vendor.reset();
  w.percent_of_ceiling = 12.3456789;
  w.ceiling = "dram_copy";
  e.variants = {v, w}; // out of order on purpose: the file is sorted by name
  return e;
}

TEST(ExpectationsJson, StableKeyOrderRoundingAndSorting) {
  const std::string text = expectations_to_text(small_expectations());
  expect_golden(text, "expectations_small.json");
  // Sorted by name, rounded to 6 significant digits.
  EXPECT_LT(text.find("01_a"), text.find("02_b"));
  EXPECT_NE(text.find("\"median_ms\": 1.23457"), std::string::npos);
  EXPECT_NE(text.find("\"percent_of_ceiling\": 12.3457"), std::string::npos);
  EXPECT_NE(text.find("\"fraction_of_vendor\": {\n            \"value\": 0.812346"),
            std::string::npos)
      << text;
  // Parse and write again: byte for byte the same file.
  EXPECT_EQ(expectations_to_text(expectations_from_text(text, "x")), text);
}

TEST(ExpectationsJson, CorruptNewerOrForeignFilesAreDataErrorsThatNameTheFile) {
  const std::string good = expectations_to_text(small_expectations());
  const auto throws_naming = [](const std::string& text, const std::string& needle) {
    try {
      expectations_from_text(text, "chapters/x/expectations_h100_sxm.json");
      ADD_FAILURE() << "accepted: " << text.substr(0, 60);
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("chapters/x/expectations_h100_sxm.json"), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  };
  throws_naming("{ not json", "not valid JSON");
  throws_naming(R"({"schema": "aisp.results"})", "not an aisp expectations file");
  auto j = nlohmann::json::parse(good);
  j["schema_version"] = k_expectations_schema_version + 1;
  throws_naming(j.dump(), "newer than this aisp");
  j = nlohmann::json::parse(good);
  j["configurations"][0]["variants"][0].erase("median_ms");
  throws_naming(j.dump(), "malformed");
  j = nlohmann::json::parse(good);
  j["configurations"][0]["variants"][0]["median_ms"] = -1.0;
  throws_naming(j.dump(), "not positive");
}

TEST(ExpectationsFiles, LadderFolderIsTheUniqueChapterLadderDirectory) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  EXPECT_EQ(ladder_folder(chapters, "ch07:copy"), chapters + "/ch07_memory_access/copy");
  EXPECT_EQ(expectations_path(chapters, "ch07:copy", "h200"),
            chapters + "/ch07_memory_access/copy/expectations_h200.json");
  EXPECT_THROW(ladder_folder(chapters, "ch07:transpose"), UsageError);
  EXPECT_THROW(ladder_folder(chapters, "ch08:copy"), UsageError);
  EXPECT_THROW(ladder_folder(chapters, "ch07"), UsageError);
  EXPECT_THROW(ladder_folder(dir / "no_such_folder", "ch07:copy"), UsageError);
  fs::create_directories(chapters + "/ch07_other/copy");
  EXPECT_THROW(ladder_folder(chapters, "ch07:copy"), UsageError); // two candidates: never a guess
}

TEST(ExpectationsUpdate, WritesPassingVariantsWithProvenance) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  const LoadedRun a = load_run(k_run_a);
  const auto updates = update_expectations(a, chapters);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_TRUE(updates[0].written) << updates[0].error;
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->size(), 1u);
  const Expectations* e = &file->front();
  EXPECT_EQ(e->hardware_key, "h100_sxm");
  EXPECT_EQ(e->mode, "cold");
  EXPECT_EQ(e->axes.at("n"), std::int64_t{1} << 30);
  ASSERT_EQ(e->variants.size(), 5u);
  const auto* v = e->find("ch07:copy:03_vectorized");
  ASSERT_TRUE(v);
  EXPECT_NEAR(v->median_ms, 3.0837, 1e-4);
  EXPECT_LT(v->ci_low_ms, v->median_ms);
  EXPECT_GT(v->ci_high_ms, v->median_ms);
  EXPECT_EQ(v->samples, 40u);
  EXPECT_GT(v->gb_per_s, 2700);
  ASSERT_TRUE(v->speedup_vs_baseline);
  EXPECT_NEAR(v->speedup_vs_baseline->value, 8.04, 0.01);
  EXPECT_FALSE(v->percent_of_ceiling); // run A predates ceilings
  EXPECT_EQ(v->provenance.git_sha, "e63b87c2a1d94f0b8c7e6d5a4b3c2d1e0f9a8b7c");
  EXPECT_EQ(v->provenance.git_dirty, "false");
  EXPECT_EQ(v->provenance.driver, 13000);
  EXPECT_EQ(v->provenance.date, "2026-11-20T09:00:00Z");
  EXPECT_EQ(v->provenance.mode, "cold");
  EXPECT_EQ(v->provenance.clocks_policy, "as found (aisp never changes clocks)");
  // The file a checkout would carry for this run (also the CLI test's input).
  expect_golden(slurp(updates[0].path), "expectations_run_a.json");
}

TEST(ExpectationsUpdate, MergesKeepsNonPassingEntriesAndRecordsCeilings) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  update_expectations(load_run(k_run_a), chapters);
  const LoadedRun b = load_run(k_run_b);
  const auto updates = update_expectations(b, chapters);
  ASSERT_EQ(updates.size(), 1u);
  ASSERT_TRUE(updates[0].written);
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file && file->size() == 1u);
  const Expectations* e = &file->front();
  // 02_coalesced is NOISY in B: A's entry stays, and the note says so.
  const auto* coalesced = e->find("ch07:copy:02_coalesced");
  ASSERT_TRUE(coalesced);
  EXPECT_EQ(coalesced->provenance.run_id, "20261120T090000Z_ch07-copy");
  bool noted = false;
  for (const auto& n : updates[0].notes)
    noted |= n.find("02_coalesced: not updated (NOISY") != std::string::npos;
  EXPECT_TRUE(noted);
  const auto* vectorized = e->find("ch07:copy:03_vectorized");
  EXPECT_EQ(vectorized->provenance.run_id, "20261121T093000Z_ch07-copy");
  EXPECT_EQ(vectorized->provenance.git_dirty, "true");
  ASSERT_TRUE(vectorized->percent_of_ceiling);
  EXPECT_NEAR(*vectorized->percent_of_ceiling, 48.006, 0.01);
  EXPECT_EQ(vectorized->ceiling, "dram_copy");
}

TEST(ExpectationsUpdate, SelectorsLimitWhatIsWritten) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  const auto updates = update_expectations(load_run(k_run_a), chapters, {"ch07:copy:04_in_flight"});
  ASSERT_EQ(updates.size(), 1u);
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file && file->size() == 1u);
  const Expectations* e = &file->front();
  ASSERT_EQ(e->variants.size(), 1u);
  EXPECT_EQ(e->variants[0].name, "ch07:copy:04_in_flight");
  EXPECT_TRUE(update_expectations(load_run(k_run_a), chapters, {"ch09"}).empty());
}

TEST(ExpectationsUpdate, OtherConfigurationIsAddedBesideTheStoredOne) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  update_expectations(load_run(k_run_a), chapters);
  LoadedRun hot = load_run(k_run_a);
  hot.results.targets[0].mode = CacheMode::hot;
  hot.results.targets[0].variants.resize(2);
  const auto updates = update_expectations(hot, chapters);
  ASSERT_TRUE(updates[0].written);
  bool noted = false;
  for (const auto& n : updates[0].notes)
    noted |= n.find("added the configuration (mode hot, gpu clock, n=1073741824) beside the 1 stored") !=
             std::string::npos;
  EXPECT_TRUE(noted);
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->size(), 2u);
  const auto* cold = find_configuration(*file, "cold", "gpu", {{"n", std::int64_t{1} << 30}});
  const auto* warm = find_configuration(*file, "hot", "gpu", {{"n", std::int64_t{1} << 30}});
  ASSERT_TRUE(cold && warm);
  EXPECT_EQ(cold->variants.size(), 5u); // the cold configuration is kept as it was
  EXPECT_EQ(warm->variants.size(), 2u); // nothing of the cold configuration is mixed in
}

// Two points of a sweep in one run: one file, one configuration per point; a later run of one point
// updates that point and leaves the other alone.
TEST(ExpectationsUpdate, SweepPointsAreConfigurationsOfOneFile) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  LoadedRun run = load_run(k_run_a);
  TargetResult small = run.results.targets[0];
  small.axes["n"] = 1 << 20;
  run.results.targets.push_back(small);
  const auto updates = update_expectations(run, chapters);
  ASSERT_EQ(updates.size(), 1u); // one update per target, not per point
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  bool named = false;
  for (const auto& n : updates[0].notes)
    named |= n.find("[n=1048576]") != std::string::npos;
  EXPECT_TRUE(named);
  auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->size(), 2u);
  EXPECT_EQ(file->at(0).axes.at("n"), 1 << 20); // sorted by axes, numerically
  EXPECT_EQ(file->at(1).axes.at("n"), std::int64_t{1} << 30);
  EXPECT_EQ(file->at(0).schema_version, k_expectations_schema_version);

  LoadedRun one = load_run(k_run_b);
  one.results.targets[0].axes["n"] = 1 << 20;
  ASSERT_TRUE(update_expectations(one, chapters)[0].written);
  file = read_expectations(updates[0].path);
  ASSERT_EQ(file->size(), 2u);
  EXPECT_EQ(file->at(0).find("ch07:copy:03_vectorized")->provenance.run_id, "20261121T093000Z_ch07-copy");
  EXPECT_EQ(file->at(1).find("ch07:copy:03_vectorized")->provenance.run_id, "20261120T090000Z_ch07-copy");
}

// Files written before configurations existed (schema v1: one configuration at the top level) still
// read, and are rewritten as v2 on the next update.
TEST(ExpectationsJson, VersionOneFilesStillRead) {
  const std::string v1 = R"({"schema": "aisp.expectations", "schema_version": 1, "target": "ch07:copy",
    "hardware_key": "h100_sxm", "mode": "cold", "clock": "gpu", "axes": {"n": 1024},
    "variants": [{"name": "ch07:copy:01_a", "kind": "baseline", "median_ms": 2.0,
      "median_ci_ms": {"low": 1.9, "high": 2.1}, "samples": 10, "gb_per_s": 1.0, "tflop_per_s": 0,
      "percent_of_ceiling": null, "ceiling": "", "speedup_vs_baseline": null,
      "provenance": {"run_id": "r", "date": "d", "git_sha": "s", "git_dirty": "false", "device": "GPU",
        "driver": 1, "runtime": 1, "clocks_policy": "as found", "mode": "cold"}}]})";
  const auto configs = expectations_from_text(v1, "old.json");
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].schema_version, 1);
  EXPECT_EQ(configs[0].target, "ch07:copy");
  EXPECT_EQ(configs[0].axes.at("n"), 1024);
  ASSERT_TRUE(configs[0].find("ch07:copy:01_a"));
  EXPECT_DOUBLE_EQ(configs[0].find("ch07:copy:01_a")->median_ms, 2.0);
  EXPECT_FALSE(configs[0].find("ch07:copy:01_a")->fraction_of_vendor); // a key it predates
  const std::string rewritten = expectations_to_text(configs);
  EXPECT_NE(rewritten.find("\"schema_version\": 2"), std::string::npos);
  EXPECT_NE(rewritten.find("\"configurations\""), std::string::npos);
  EXPECT_NE(rewritten.find("\"fraction_of_vendor\": null"), std::string::npos);
}

// fraction_of_vendor (vendor median / this median, measured in the entry's own run) is stored for
// bench check's MACHINE-DRIFT judgement; files of schema v2 written before it existed still load.
TEST(ExpectationsFiles, FractionOfVendorIsStoredFromTheRunAndOptionalOnRead) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  const LoadedRun a = load_run(k_run_a);
  const auto updates = update_expectations(a, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  const auto* stored = file->at(0).find("ch07:copy:03_vectorized");
  ASSERT_TRUE(stored && stored->fraction_of_vendor);
  const auto& measured = *a.results.targets[0].variants[2].fraction_of_vendor;
  EXPECT_NEAR(stored->fraction_of_vendor->value, measured.value, 1e-5 * measured.value);
  EXPECT_NEAR(stored->fraction_of_vendor->low, measured.low, 1e-5 * measured.low);
  EXPECT_NEAR(stored->fraction_of_vendor->high, measured.high, 1e-5 * measured.high);
  EXPECT_FALSE(
      file->at(0).find("ch07:copy:vendor_memcpy")->fraction_of_vendor); // the vendor itself

  auto j = nlohmann::json::parse(slurp(updates[0].path));
  for (auto& v : j["configurations"][0]["variants"])
    v.erase("fraction_of_vendor");
  const auto old = expectations_from_text(j.dump(), "old.json");
  for (const auto& v : old.at(0).variants)
    EXPECT_FALSE(v.fraction_of_vendor) << v.name;
}

TEST(ExpectationsFiles, FactsAreStoredSortedShownUnderTheTableAndOptionalOnRead) {
  Expectations e = small_expectations();
  e.variants[0].facts = {{"tpot_ms_p50_p99", "1.43 / 1.73"}, {"goodput", "26.52 req/s"}};
  const std::string text = expectations_to_text(e);
  const auto j = nlohmann::json::parse(text);
  const auto& variants = j["configurations"][0]["variants"];
  ASSERT_EQ(variants.size(), 2u);
  EXPECT_FALSE(variants[0].contains("facts")) << "01_a has none: its entry keeps the old shape";
  ASSERT_TRUE(variants[1].contains("facts"));
  const auto back = expectations_from_text(text, "facts.json");
  const auto* v = back.at(0).find("ch07:copy:02_b");
  ASSERT_TRUE(v);
  const std::vector<std::pair<std::string, std::string>> want = {{"goodput", "26.52 req/s"},
                                                                 {"tpot_ms_p50_p99", "1.43 / 1.73"}};
  EXPECT_EQ(v->facts, want);
  EXPECT_TRUE(back.at(0).find("ch07:copy:01_a")->facts.empty());

  const std::string md = render_expectations_markdown(back);
  const auto table_end = md.find("Facts, from one launch like the timed ones (no interval):");
  ASSERT_NE(table_end, std::string::npos) << md;
  EXPECT_LT(md.find("| 02_b |"), table_end);
  EXPECT_NE(md.find("- `02_b`: goodput 26.52 req/s · tpot_ms_p50_p99 1.43 / 1.73\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("- `01_a`"), std::string::npos);
  EXPECT_EQ(render_expectations_markdown({small_expectations()}).find("Facts,"), std::string::npos);
}

TEST(ExpectationsUpdate, FactsComeFromTheRun) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  LoadedRun a = load_run(k_run_a);
  a.results.targets[0].variants[2].facts = {{"regs", "40"}, {"blocks_per_sm", "8"}};
  const auto updates = update_expectations(a, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  const auto* stored = file->at(0).find(a.results.targets[0].variants[2].name);
  ASSERT_TRUE(stored);
  const std::vector<std::pair<std::string, std::string>> want = {{"blocks_per_sm", "8"}, {"regs", "40"}};
  EXPECT_EQ(stored->facts, want);
}

TEST(ExpectationsFiles, AThrottledMeasurementSaysSoInTheTableAndItsFile) {
  Expectations e = small_expectations();
  for (auto& v : e.variants) {
    if (v.name != "ch07:copy:02_b") continue;
    v.throttled = true;
    v.throttle_reasons = {"sw_power_cap"};
  }
  const std::string text = expectations_to_text(e);
  const auto j = nlohmann::json::parse(text);
  const auto& variants = j["configurations"][0]["variants"];
  EXPECT_FALSE(variants[0].contains("throttled")) << "01_a did not throttle: its entry keeps the old shape";
  EXPECT_EQ(variants[1]["throttled"]["reasons"], nlohmann::json::array({"sw_power_cap"}));
  const auto back = expectations_from_text(text, "throttled.json");
  EXPECT_FALSE(back.at(0).find("ch07:copy:01_a")->throttled);
  const auto* v = back.at(0).find("ch07:copy:02_b");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->throttled);
  EXPECT_EQ(v->throttle_reasons, std::vector<std::string>{"sw_power_cap"});
  const std::string md = render_expectations_markdown(back);
  const auto row_b = md.find("| 02_b |");
  ASSERT_NE(row_b, std::string::npos) << md;
  EXPECT_NE(md.find(", throttled (sw_power_cap) |", row_b), std::string::npos) << md;
  EXPECT_EQ(md.substr(md.find("| 01_a |"), row_b - md.find("| 01_a |")).find("throttled"), std::string::npos) << md;
}

TEST(ExpectationsUpdate, AThrottledVariantIsStoredAsThrottled) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  LoadedRun a = load_run(k_run_a);
  TelemetryRecord telemetry;
  telemetry.throttled = true;
  telemetry.throttle_reasons = {"sw_power_cap", "hw_slowdown"};
  a.results.targets[0].variants[2].telemetry = telemetry;
  const auto updates = update_expectations(a, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  const auto* stored = file->at(0).find(a.results.targets[0].variants[2].name);
  ASSERT_TRUE(stored);
  EXPECT_TRUE(stored->throttled);
  EXPECT_EQ(stored->throttle_reasons, (std::vector<std::string>{"sw_power_cap", "hw_slowdown"}));
  EXPECT_FALSE(file->at(0).find(a.results.targets[0].variants[0].name)->throttled);
}

TEST(ExpectationsJson, TheSamePointTwiceIsADataError) {
  Expectations e = small_expectations();
  std::string text = expectations_to_text(std::vector<Expectations>{e, e});
  EXPECT_THROW(expectations_from_text(text, "twice.json"), DataError);
  Expectations other = e;
  other.target = "ch07:transpose";
  EXPECT_THROW(expectations_to_text(std::vector<Expectations>{e, other}), std::invalid_argument);
}

TEST(ExpectationsUpdate, CorruptOrNewerFileIsNeverOverwritten) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  const std::string path = chapters + "/ch07_memory_access/copy/expectations_h100_sxm.json";
  for (const std::string& text :
       {std::string("{ half a file"),
        std::string(R"({"schema": "aisp.expectations", "schema_version": 99})")}) {
    spit(path, text);
    const auto updates = update_expectations(load_run(k_run_a), chapters);
    ASSERT_EQ(updates.size(), 1u);
    EXPECT_FALSE(updates[0].written);
    EXPECT_NE(updates[0].error.find(path), std::string::npos) << updates[0].error;
    EXPECT_EQ(slurp(path), text);
  }
  // A file named for this hardware that holds another's expectations is not trusted either.
  Expectations other = small_expectations();
  other.hardware_key = "h200";
  spit(path, expectations_to_text(other));
  const auto updates = update_expectations(load_run(k_run_a), chapters);
  EXPECT_FALSE(updates[0].written);
  EXPECT_NE(updates[0].error.find("h200"), std::string::npos);
}

TEST(ExpectationsUpdate, NoLadderFolderIsReportedNotSkipped) {
  ScratchDir dir;
  fs::create_directories(dir / "chapters");
  const auto updates = update_expectations(load_run(k_run_a), dir / "chapters");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_FALSE(updates[0].written);
  EXPECT_NE(updates[0].error.find("no ladder folder"), std::string::npos);
}

TEST(ExpectationsFiles, ReadAllSortedByHardwareKeyAndCorruptOnesThrow) {
  ScratchDir dir;
  const std::string folder = dir / "copy";
  Expectations e = small_expectations();
  e.hardware_key = "h200";
  spit(folder + "/expectations_h200.json", expectations_to_text(e));
  e.hardware_key = "h100_sxm";
  spit(folder + "/expectations_h100_sxm.json", expectations_to_text(e));
  spit(folder + "/README.md", "not an expectations file");
  const auto all = read_all_expectations(folder);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].hardware_key, "h100_sxm");
  EXPECT_EQ(all[1].hardware_key, "h200");
  spit(folder + "/expectations_2x_h200.json", "[]");
  EXPECT_THROW(read_all_expectations(folder), DataError);
}

// The cold flush is part of a configuration (docs/measurement-methods.md): a cold configuration stored
// before the field existed was flushed by writing, and reads back as such.
TEST(ExpectationsFlush, StoredColdWithoutTheFieldIsTheWriteFlushAndRoundTrips) {
  Expectations e = small_expectations();
  std::string text = expectations_to_text(e);
  EXPECT_NE(text.find("\"l2_flush\": \"read\""), std::string::npos) << text;
  EXPECT_EQ(expectations_from_text(text, "x").front().mode, "cold");
  // The same file as written before the field: the write flush.
  const std::string legacy = text.replace(text.find("\"l2_flush\": \"read\",\n"),
                                          std::string("\"l2_flush\": \"read\",\n").size() + 6, "");
  ASSERT_EQ(legacy.find("l2_flush"), std::string::npos) << legacy;
  const auto configs = expectations_from_text(legacy, "old.json");
  EXPECT_EQ(configs.front().mode, k_cold_write_flush_mode);
  EXPECT_EQ(configuration_text(configs.front().mode, "gpu", {}), "mode cold (write flush), gpu clock");
  // Written again, it says so, and reads back unchanged.
  const std::string again = expectations_to_text(configs);
  EXPECT_NE(again.find("\"mode\": \"cold\",\n      \"l2_flush\": \"write\""), std::string::npos) << again;
  EXPECT_EQ(expectations_from_text(again, "x").front().mode, k_cold_write_flush_mode);
  // A hot configuration has no flush; an unknown one is refused.
  e.mode = "hot";
  EXPECT_EQ(expectations_to_text(e).find("l2_flush"), std::string::npos);
  std::string bad = expectations_to_text(small_expectations());
  bad.replace(bad.find("\"read\""), 6, "\"wipe\"");
  EXPECT_THROW(expectations_from_text(bad, "bad.json"), DataError);
}

TEST(ExpectationsFlush, ResultsRecordTheFlushAndOlderRunsReadAsWrite) {
  // A run written before the field (the fixture without its "l2_flush"): flushed by writing.
  std::string old_text = slurp(k_run_a + "/results.json");
  old_text.erase(old_text.find("\"l2_flush\": \"read\","), std::string("\"l2_flush\": \"read\",").size());
  const RunResults old_results = run_results_from_json(nlohmann::json::parse(old_text));
  ASSERT_EQ(old_results.targets[0].mode, CacheMode::cold);
  EXPECT_EQ(old_results.targets[0].l2_flush, L2Flush::write);
  LoadedRun run = load_run(k_run_a);
  EXPECT_EQ(run.results.targets[0].l2_flush, L2Flush::read);
  run.results.targets[0].l2_flush = L2Flush::write;
  EXPECT_EQ(configuration_mode(run.results.targets[0]), k_cold_write_flush_mode);
  TargetResult t = run.results.targets[0];
  t.l2_flush = L2Flush::read;
  const auto j = nlohmann::json::parse(to_json(t).dump());
  EXPECT_EQ(j.at("l2_flush"), "read");
  EXPECT_EQ(target_result_from_json(j).l2_flush, L2Flush::read);
  EXPECT_EQ(configuration_mode(t), "cold");
  t.mode = CacheMode::hot;
  EXPECT_FALSE(nlohmann::json::parse(to_json(t).dump()).contains("l2_flush"));
  EXPECT_EQ(configuration_mode(t), "hot");
}

TEST(ExpectationsFlush, EnvironmentPicksTheFlushAndRefusesOtherValues) {
  const char* saved = std::getenv("AISP_L2_FLUSH");
  const std::string keep = saved ? saved : "";
  unsetenv("AISP_L2_FLUSH");
  EXPECT_EQ(l2_flush_from_env(), L2Flush::read);
  setenv("AISP_L2_FLUSH", "write", 1);
  EXPECT_EQ(l2_flush_from_env(), L2Flush::write);
  setenv("AISP_L2_FLUSH", "read", 1);
  EXPECT_EQ(l2_flush_from_env(), L2Flush::read);
  setenv("AISP_L2_FLUSH", "memset", 1);
  try {
    l2_flush_from_env();
    ADD_FAILURE() << "AISP_L2_FLUSH=memset was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("AISP_L2_FLUSH must be read or write, not 'memset'"), std::string::npos);
  }
  if (saved) setenv("AISP_L2_FLUSH", keep.c_str(), 1); else unsetenv("AISP_L2_FLUSH");
}

// Re-measuring a point with the read flush replaces its write-flush configuration (all of it: numbers of
// the two flushes are not comparable), and only that point's.
TEST(ExpectationsFlush, TheReadFlushReplacesTheWriteFlushConfigurationOfThePoint) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  LoadedRun old_run = load_run(k_run_a);  // 5 variants, measured here with the write flush
  old_run.results.targets[0].l2_flush = L2Flush::write;
  TargetResult other_point = old_run.results.targets[0];
  other_point.axes["n"] = 1 << 20;
  old_run.results.targets.push_back(other_point);
  ASSERT_TRUE(update_expectations(old_run, chapters)[0].written);
  LoadedRun fresh = load_run(k_run_b);  // its 02_coalesced is NOISY: one of the two is written
  fresh.results.targets[0].variants.resize(2);
  const auto updates = update_expectations(fresh, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  bool noted = false;
  for (const auto& n : updates[0].notes)
    noted |= n.find("replaced the configuration (mode cold (write flush), gpu clock, n=1073741824) and its 5 "
                    "variants: measured with the other L2 flush") != std::string::npos;
  EXPECT_TRUE(noted);
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->size(), 2u);
  const auto* read = find_configuration(*file, "cold", "gpu", {{"n", std::int64_t{1} << 30}});
  ASSERT_TRUE(read);
  ASSERT_EQ(read->variants.size(), 1u);  // none of the write flush's five is kept beside it
  EXPECT_EQ(read->variants[0].name, "ch07:copy:01_chunked");
  EXPECT_FALSE(find_configuration(*file, k_cold_write_flush_mode, "gpu", {{"n", std::int64_t{1} << 30}}));
  // The other point, not re-measured, keeps its write-flush numbers, and says so.
  EXPECT_TRUE(find_configuration(*file, k_cold_write_flush_mode, "gpu", {{"n", 1 << 20}}));
}

// --- configurations stored before an axis existed (TargetResult::key_axes) ---

// A file of three configurations: one stored before the axis `n` existed (no `n`), and two points of `n`.
std::string stale_and_current_file(const ScratchDir& dir) {
  const std::string chapters = make_chapters(dir);
  LoadedRun old_run = load_run(k_run_a);
  TargetResult before_n = old_run.results.targets[0];
  before_n.axes.clear();
  TargetResult other_point = old_run.results.targets[0];
  other_point.axes["n"] = 1 << 20;
  old_run.results.targets.push_back(before_n);
  old_run.results.targets.push_back(other_point);
  const auto updates = update_expectations(old_run, chapters);
  EXPECT_TRUE(updates[0].written) << updates[0].error;
  EXPECT_EQ(read_expectations(updates[0].path)->size(), 3u);
  return chapters;
}

bool has_note(const ExpectationUpdate& u, const std::string& text) {
  return std::any_of(u.notes.begin(), u.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

std::size_t drop_notes(const ExpectationUpdate& u) {
  return static_cast<std::size_t>(
      std::count_if(u.notes.begin(), u.notes.end(), [](const std::string& n) { return n.starts_with("dropped"); }));
}

TEST(ExpectationsUpdate, ARunWithKeyAxesDropsConfigurationsStoredBeforeOneExisted) {
  ScratchDir dir;
  const std::string chapters = stale_and_current_file(dir);
  LoadedRun run = load_run(k_run_b);  // n = 1 Gi; its 02_coalesced is NOISY, the others PASS
  run.results.targets[0].key_axes = {"n"};
  const auto updates = update_expectations(run, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  EXPECT_TRUE(has_note(updates[0], "dropped mode cold, gpu clock: stored before axis 'n' existed"));
  EXPECT_EQ(drop_notes(updates[0]), 1u);
  const auto file = read_expectations(updates[0].path);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->size(), 2u);
  EXPECT_FALSE(find_configuration(*file, "cold", "gpu", {}));
  // The point this run measured is updated; the other point carries every key axis and is kept as it was.
  const auto* measured = find_configuration(*file, "cold", "gpu", {{"n", std::int64_t{1} << 30}});
  const auto* other = find_configuration(*file, "cold", "gpu", {{"n", 1 << 20}});
  ASSERT_TRUE(measured && other);
  EXPECT_EQ(measured->find("ch07:copy:03_vectorized")->provenance.run_id, "20261121T093000Z_ch07-copy");
  EXPECT_EQ(other->variants.size(), 5u);
  EXPECT_EQ(other->find("ch07:copy:03_vectorized")->provenance.run_id, "20261120T090000Z_ch07-copy");
}

// Runs written before key_axes existed (the field absent) prune nothing.
TEST(ExpectationsUpdate, ARunWithoutKeyAxesDropsNothing) {
  ScratchDir dir;
  const std::string chapters = stale_and_current_file(dir);
  const LoadedRun run = load_run(k_run_b);
  ASSERT_TRUE(run.results.targets[0].key_axes.empty());
  const auto updates = update_expectations(run, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  EXPECT_EQ(drop_notes(updates[0]), 0u);
  const auto file = read_expectations(updates[0].path);
  ASSERT_EQ(file->size(), 3u);
  EXPECT_TRUE(find_configuration(*file, "cold", "gpu", {}));
}

// An omit_at_default axis is never a key axis: configurations stored without it (they hold its default)
// stay, beside the run's point at another value of it.
TEST(ExpectationsUpdate, AnAxisLeftOutAtItsDefaultNeverCausesADrop) {
  ScratchDir dir;
  const std::string chapters = stale_and_current_file(dir);
  const std::vector<AxisSpec> specs{{.name = "n", .default_value = 1 << 20, .help = "elements"},
                                    {.name = "shape", .default_value = 0, .help = "a later axis", .min_value = 0,
                                     .omit_at_default = true}};
  LoadedRun run = load_run(k_run_b);
  run.results.targets[0].axes = recorded_axes(specs, {{"n", std::int64_t{1} << 30}, {"shape", 2}});
  run.results.targets[0].key_axes = key_axis_names(specs);
  const auto updates = update_expectations(run, chapters);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  EXPECT_TRUE(has_note(updates[0], "dropped mode cold, gpu clock: stored before axis 'n' existed"));
  EXPECT_FALSE(has_note(updates[0], "axis 'shape'"));
  const auto file = read_expectations(updates[0].path);
  ASSERT_EQ(file->size(), 3u);
  EXPECT_TRUE(find_configuration(*file, "cold", "gpu", {{"n", std::int64_t{1} << 30}}));
  EXPECT_TRUE(find_configuration(*file, "cold", "gpu", {{"n", 1 << 20}}));
  EXPECT_TRUE(find_configuration(*file, "cold", "gpu", {{"n", std::int64_t{1} << 30}, {"shape", 2}}));
}

// An update that writes nothing drops nothing either, and says so.
TEST(ExpectationsUpdate, NothingWrittenNothingDropped) {
  ScratchDir dir;
  const std::string chapters = stale_and_current_file(dir);
  LoadedRun run = load_run(k_run_b);
  run.results.targets[0].key_axes = {"n"};
  for (auto& v : run.results.targets[0].variants) v.verdict = Verdict::fail;
  const auto updates = update_expectations(run, chapters);
  EXPECT_FALSE(updates[0].written);
  EXPECT_EQ(drop_notes(updates[0]), 0u);
  EXPECT_TRUE(has_note(updates[0], "no variant passed: nothing written, and nothing dropped (1 configuration(s) "
                                   "stored before an axis existed)"));
  EXPECT_EQ(read_expectations(updates[0].path)->size(), 3u);
}

} // namespace
