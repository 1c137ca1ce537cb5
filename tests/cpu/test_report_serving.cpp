#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/base/error.hpp"
#include "core/report/report_html.hpp"
#include "core/report/report_markdown.hpp"
#include "core/report/report_serving.hpp"
#include "core/results/run_folder.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

// The measured rate sweep kept in docs/ (three rates on an H100).
const std::string k_sweep_file =
    k_data_dir + "/../../docs/results/serving/h100_sxm_llama3-8b_sweep.json";

// A small loadgen file: `runs` is the JSON array of its runs.
std::string loadgen_text(const std::string& runs) {
  return R"({"schema": "aisp.loadgen/1", "model": "tiny", "url": "http://127.0.0.1:1",
             "config": {"num_prompts": 8, "dataset": "", "input_len": 32, "output_len": 16,
                        "slo_ms": {"ttft": 500, "tpot": null, "e2el": null}},
             "runs": )" +
         runs + "}";
}

std::string run_json(const std::string& rate, int concurrency, double tok_s, double ttft,
                     double tpot, const std::string& extra = "") {
  const auto dist = [](double p50, double p99) {
    return fmt::format(R"({{"p50": {}, "p99": {}}})", p50, p99);
  };
  return fmt::format(R"({{"rate": {}, "max_concurrency": {}, "summary": {{"requests": 8,
      "completed": 8, "request_throughput": {}, "output_throughput": {}, "goodput": null,
      "ttft_ms": {}, "tpot_ms": {}, "itl_ms": {}, "e2el_ms": {}{}}}}})",
                     rate, concurrency, tok_s / 16, tok_s, dist(ttft, ttft * 2),
                     dist(tpot, tpot * 1.5), dist(tpot, tpot * 3), dist(ttft + 16 * tpot, 0),
                     extra);
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
    ++n;
  return n;
}

TEST(ReportServing, SweepFileGetsSectionTableAndCurve) {
  const LoadgenFile f = load_loadgen_file(k_sweep_file);
  ASSERT_EQ(f.runs.size(), 3u);
  const std::string html = render_html_report(std::vector<LoadgenFile>{f});
  EXPECT_NE(html.find("<h2>Serving load tests</h2>"), std::string::npos);
  EXPECT_EQ(count_of(html, "<table class=\"serving\">"), 1u);
  EXPECT_EQ(count_of(html, "<svg class=\"aisp-sweep\""), 1u);
  // One line per latency figure, each through the three rates; TPOT p99 and TTFT p50 points are
  // labelled by rate (TPOT p50's sit just below p99's).
  EXPECT_EQ(count_of(html, "<polyline"), 3u);
  EXPECT_EQ(count_of(html, "<circle"), 9u);
  EXPECT_EQ(count_of(html, "class=\"point-label\""), 6u);
  for (const char* label : {">TPOT p50<", ">TPOT p99<", ">TTFT p50<", ">4/s<", ">16/s<", ">64/s<"})
    EXPECT_NE(html.find(label), std::string::npos) << label;
  EXPECT_NE(html.find("output tokens/s"), std::string::npos);
  // Still a page that runs nothing and fetches nothing.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST(ReportServing, TableNumbersMatchTheJson) {
  const LoadgenFile f = load_loadgen_file(k_sweep_file);
  const auto doc = nlohmann::json::parse(slurp(k_sweep_file));
  const TextTable t = serving_table(f);
  ASSERT_EQ(t.header.back(), "server overhead");
  ASSERT_EQ(t.rows.size(), doc["runs"].size());
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(t.header.begin(), t.header.end(), name) -
                                    t.header.begin());
  };
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const auto& s = doc["runs"][i]["summary"];
    const auto& row = t.rows[i];
    EXPECT_EQ(row[col("load")], fmt::format("rate {:g}/s", doc["runs"][i]["rate"].get<double>()));
    EXPECT_EQ(row[col("done")],
              fmt::format("{}/{}", s["completed"].get<int>(), s["requests"].get<int>()));
    EXPECT_EQ(row[col("in/out tokens")], "512/256");
    EXPECT_EQ(row[col("req/s")], fmt::format("{:.2f}", s["request_throughput"].get<double>()));
    EXPECT_EQ(row[col("out tok/s")], fmt::format("{:.0f}", s["output_throughput"].get<double>()));
    EXPECT_EQ(row[col("TTFT p50 ms")], fmt::format("{:.1f}", s["ttft_ms"]["p50"].get<double>()));
    EXPECT_EQ(row[col("TTFT p99 ms")], fmt::format("{:.1f}", s["ttft_ms"]["p99"].get<double>()));
    EXPECT_EQ(row[col("TPOT p50 ms")], fmt::format("{:.2f}", s["tpot_ms"]["p50"].get<double>()));
    EXPECT_EQ(row[col("TPOT p99 ms")], fmt::format("{:.2f}", s["tpot_ms"]["p99"].get<double>()));
    EXPECT_EQ(row[col("goodput req/s")], fmt::format("{:.2f}", s["goodput"].get<double>()));
    EXPECT_EQ(
        row[col("server overhead")],
        fmt::format("{:.1f}%", 100 * s["server_overhead"]["overhead_fraction"].get<double>()));
  }
  // Spot values, typed from the file, so a formatting slip on both sides is caught too.
  EXPECT_EQ(t.rows[0][col("out tok/s")], "817");
  EXPECT_EQ(t.rows[2][col("TPOT p99 ms")], "11.35");
  EXPECT_EQ(t.rows[2][col("server overhead")], "3.1%");
}

TEST(ReportServing, SingleRunGetsATableAndNoCurve) {
  const LoadgenFile f = loadgen_from_text(
      loadgen_text("[" + run_json("\"inf\"", 64, 5000, 400, 10) + "]"), "one.json");
  EXPECT_FALSE(serving_curve_of(f).has_value());
  const std::string html = render_html_report(std::vector<LoadgenFile>{f});
  EXPECT_NE(html.find("<table class=\"serving\">"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  const TextTable t = serving_table(f);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0][0], "concurrency 64");
  // No run carries the server's counters: no column; no SLO result: "-".
  EXPECT_EQ(t.header.back(), "goodput req/s");
  EXPECT_EQ(t.rows[0].back(), "-");
  EXPECT_EQ(f.slo_text, "ttft <= 500 ms");
}

TEST(ReportServing, CurveLeavesOutRunsWithoutCompletedRequests) {
  const std::string dead = R"({"rate": 99, "max_concurrency": 0, "summary": {"requests": 8,
      "completed": 0, "request_throughput": 0, "output_throughput": 0, "goodput": null,
      "ttft_ms": {"p50": 0, "p99": 0}, "tpot_ms": {"p50": 0, "p99": 0}}})";
  const LoadgenFile f = loadgen_from_text(
      loadgen_text("[" + run_json("2", 0, 100, 20, 5) + "," + dead + "]"), "dead.json");
  EXPECT_FALSE(serving_curve_of(f).has_value()); // one drawable run is no curve
  const TextTable t = serving_table(f);
  EXPECT_EQ(t.rows[1][0], "rate 99/s");
  EXPECT_EQ(t.rows[1][1], "0/8");
  EXPECT_EQ(t.rows[1][5], "-"); // a percentile of nothing

  const LoadgenFile two =
      loadgen_from_text(loadgen_text("[" + run_json("8", 0, 900, 30, 8) + "," +
                                     run_json("2", 0, 300, 20, 5) + "," + dead + "]"),
                        "two.json");
  const auto c = serving_curve_of(two);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->series.size(), 3u);
  // Sorted by throughput, whatever the order of the runs in the file.
  ASSERT_EQ(c->series[0].points.size(), 2u);
  EXPECT_EQ(c->series[0].points[0].x, 300);
  EXPECT_EQ(c->series[1].points[0].label, "2/s");
  EXPECT_EQ(c->series[2].points[1].label, "8/s");
  EXPECT_EQ(c->x_values, (std::vector<double>{300, 900}));
}

TEST(ReportServing, OtherSchemasAndCorruptFilesAreRefused) {
  ScratchDir dir;
  spit(dir / "compare.json", R"({"schema": "aisp.compare", "schema_version": 1})");
  EXPECT_THROW(classify_report_input(dir / "compare.json"), UsageError);
  spit(dir / "baseline.json", R"({"tool": "hf_generate_baseline", "results": []})");
  EXPECT_THROW(classify_report_input(dir / "baseline.json"), UsageError);
  spit(dir / "notes.txt", "not json");
  EXPECT_THROW(classify_report_input(dir / "notes.txt"), UsageError);
  spit(dir / "load.json", loadgen_text("[" + run_json("1", 0, 10, 1, 1) + "]"));
  EXPECT_EQ(classify_report_input(dir / "load.json"), ReportInput::loadgen);
  // Run folders and their results.json stay runs; so does what load_run must explain itself.
  EXPECT_EQ(classify_report_input(k_run_a), ReportInput::run);
  EXPECT_EQ(classify_report_input(k_run_a + "/results.json"), ReportInput::run);
  EXPECT_EQ(classify_report_input(dir / "missing"), ReportInput::run);

  EXPECT_THROW(loadgen_from_text(R"({"schema": "aisp.compare"})", "x.json"), DataError);
  EXPECT_THROW(loadgen_from_text("not json", "x.json"), DataError);
  EXPECT_THROW(loadgen_from_text(loadgen_text("[]"), "x.json"), DataError);
  EXPECT_THROW(loadgen_from_text(loadgen_text(R"([{"rate": 1}])"), "x.json"), DataError);
  EXPECT_THROW(loadgen_from_text(loadgen_text(R"([{"rate": "fast", "summary": {}}])"), "x.json"),
               DataError);
  EXPECT_THROW(
      loadgen_from_text(loadgen_text(R"([{"rate": 1, "summary": {"requests": 1}}])"), "x.json"),
      DataError);
}

TEST(ReportServing, RunReportsCarryTheSection) {
  const LoadedRun run = load_run(k_run_b);
  const std::vector<LoadgenFile> files{load_loadgen_file(k_sweep_file)};
  const std::string html = render_html_report(run, {}, files);
  const auto section = html.find("<section id=\"serving\">");
  ASSERT_NE(section, std::string::npos);
  EXPECT_LT(section, html.find("<section id=\"manifest\">"));
  // Without loadgen files the page is what it was (the golden pages cover its bytes).
  EXPECT_EQ(render_html_report(run, {}).find("Serving load tests"), std::string::npos);

  const std::string md = render_markdown_report(run, {}, files);
  EXPECT_NE(md.find("## Serving load tests"), std::string::npos);
  EXPECT_NE(md.find("| rate 16/s | 64/64 | 512/256 | 9.96 | 2550 |"), std::string::npos);
  const std::string alone = render_markdown_report(files);
  EXPECT_EQ(alone.rfind("# aisp serving report", 0), 0u);
  EXPECT_NE(alone.find("| load | done |"), std::string::npos);
}

} // namespace
