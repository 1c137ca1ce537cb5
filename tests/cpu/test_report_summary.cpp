// The report at a glance: the summary rows, the sweep charts, the one roofline of a ladder whose
// points differ in intensity, and several runs merged into one report. The sweep fixture is a real
// ch19:fp8_gemm run from an H100 (4 points: size 4096/8192 x scale_block 0/128; samples trimmed).
#include <gtest/gtest.h>

#include <regex>

#include "core/base/error.hpp"
#include "core/results/expectations.hpp"
#include "core/report/report_html.hpp"
#include "core/report/report_markdown.hpp"
#include "core/report/report_summary.hpp"
#include "core/report/report_sweep.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

const std::string k_run_ch19 = k_data_dir + "/fixtures/runs/20261125T004800Z_ch19-fp8_gemm";

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
    ++n;
  return n;
}

// Every points="..." attribute of the polylines in `svg`, as point counts.
std::vector<std::size_t> polyline_sizes(const std::string& svg) {
  std::vector<std::size_t> sizes;
  const std::regex re("<polyline points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    const std::string pts = (*it)[1];
    sizes.push_back(pts.empty() ? 0 : count_of(pts, " ") + 1);
  }
  return sizes;
}

// The stored expectations of the ch19 fixture written into a scratch chapters tree.
std::string chapters_with_ch19(const ScratchDir& dir, const LoadedRun& run) {
  const std::string chapters = dir / "chapters";
  spit(chapters + "/ch19_low_precision/fp8_gemm/problem.hpp", "// fixture: marks a ladder folder\n");
  const auto updates = update_expectations(run, chapters);
  EXPECT_EQ(updates.size(), 1u);
  EXPECT_TRUE(updates.at(0).written) << updates.at(0).error;
  return chapters;
}

TEST(ReportSummary, OneRowPerLadderOfTheSweep) {
  const LoadedRun run = load_run(k_run_ch19);
  const auto rows = summarize_ladders(run, {});
  ASSERT_EQ(rows.size(), 1u);
  const LadderSummary& r = rows[0];
  EXPECT_EQ(r.ladder, "ch19:fp8_gemm");
  EXPECT_EQ(r.points, 4u);
  // 04_persistent is fastest at the two scale_block=0 points; 06_persistent_promoted at the two
  // block-scaled ones, where 04 is SKIPPED. The tie goes to the one faster where both ran.
  EXPECT_EQ(r.best, "04_persistent");
  EXPECT_EQ(r.best_points, 2u);
  EXPECT_EQ(format_range(r.percent_of_ceiling, "%", 1), "66.8\u201371.7%");
  EXPECT_EQ(format_range(r.fraction_of_vendor, "x", 2), "0.88\u20130.92x");
  EXPECT_EQ(format_range(r.speedup_vs_baseline, "x", 2), "1.85\u20131.94x");
  EXPECT_EQ(r.verdicts, "24 PASS, 8 SKIPPED");
  EXPECT_TRUE(r.all_pass);
  EXPECT_EQ(r.expectations, "not checked");
}

TEST(ReportSummary, BestStepOfOnePointAndItsValues) {
  const LoadedRun run = load_run(k_run_b);
  const auto r = summarize_ladders(run, {}).at(0);
  EXPECT_EQ(r.points, 1u);
  EXPECT_EQ(r.best_points, 1u);
  // The fastest PASS non-vendor variant, whatever the vendor does.
  const VariantResult* fastest = nullptr;
  for (const auto& v : run.results.targets[0].variants) {
    if (v.verdict == Verdict::pass && v.kind != VariantKind::vendor &&
        (!fastest || v.stats->median < fastest->stats->median))
      fastest = &v;
  }
  ASSERT_NE(fastest, nullptr);
  EXPECT_EQ("ch07:copy:" + r.best, fastest->name);
  ASSERT_TRUE(r.percent_of_ceiling);
  EXPECT_DOUBLE_EQ(r.percent_of_ceiling->low, *percent_of_ceiling(*fastest));
  EXPECT_DOUBLE_EQ(r.percent_of_ceiling->high, r.percent_of_ceiling->low);
  EXPECT_EQ(r.verdicts, "4 PASS, 1 NOISY");
  EXPECT_FALSE(r.all_pass);
  // Nothing passed: no best step, no ranges.
  LoadedRun none = run;
  for (auto& v : none.results.targets[0].variants)
    v.verdict = Verdict::fail;
  const auto n = summarize_ladders(none, {}).at(0);
  EXPECT_TRUE(n.best.empty());
  EXPECT_FALSE(n.percent_of_ceiling || n.fraction_of_vendor || n.speedup_vs_baseline);
  EXPECT_EQ(format_range(n.speedup_vs_baseline, "x", 2), "-");
  EXPECT_EQ(n.verdicts, "5 FAIL");
}

TEST(ReportSummary, ExpectationsColumn) {
  ScratchDir dir;
  const LoadedRun run = load_run(k_run_ch19);
  const std::string chapters = chapters_with_ch19(dir, run);
  // Compared with expectations stored from this very run: nothing moved.
  auto r = summarize_ladders(run, {chapters}).at(0);
  EXPECT_EQ(r.expectations, "ok") << r.expectations_detail;
  EXPECT_FALSE(r.expectations_bad);
  EXPECT_NE(r.expectations_detail.find("24 of 32 variant runs compared"), std::string::npos)
      << r.expectations_detail;
  // 04_persistent 20% slower at one point: one regression.
  LoadedRun slow = run;
  for (auto& v : slow.results.targets[0].variants) {
    if (v.name == "ch19:fp8_gemm:04_persistent") {
      v.stats->median *= 1.2;
      v.stats->median_ci.low *= 1.2;
      v.stats->median_ci.high *= 1.2;
    }
  }
  r = summarize_ladders(slow, {chapters}).at(0);
  EXPECT_EQ(r.expectations, "1 regressed") << r.expectations_detail;
  EXPECT_TRUE(r.expectations_bad);
  // ... and 20% faster: "faster".
  for (auto& v : slow.results.targets[0].variants) {
    if (v.name == "ch19:fp8_gemm:04_persistent") {
      v.stats->median /= 1.44;
      v.stats->median_ci.low /= 1.44;
      v.stats->median_ci.high /= 1.44;
    }
  }
  EXPECT_EQ(summarize_ladders(slow, {chapters}).at(0).expectations, "1 faster");
  // Another machine: nothing stored for it.
  LoadedRun other = run;
  other.results.hardware_key = "h200";
  EXPECT_EQ(summarize_ladders(other, {chapters}).at(0).expectations, "no expectations for h200");
  // A corrupt file is said so, never thrown.
  spit(chapters + "/ch19_low_precision/fp8_gemm/expectations_h100_sxm.json", "{ corrupt");
  r = summarize_ladders(run, {chapters}).at(0);
  EXPECT_EQ(r.expectations, "unreadable expectations");
  EXPECT_TRUE(r.expectations_bad);
  // A chapters folder without the ladder.
  EXPECT_EQ(summarize_ladders(run, {dir / "nowhere"}).at(0).expectations, "no ladder folder");
}

TEST(ReportSweep, OneChartPerScaleBlockOneLinePerVariant) {
  const LoadedRun run = load_run(k_run_ch19);
  const auto groups = group_ladders(run.results);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].swept_axes, (std::vector<std::string>{"scale_block", "size"}));
  const auto charts = sweep_charts_of(groups[0]);
  // x = size (scale_block holds a 0: no ratio), one chart per scale_block.
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].x_label, "size");
  EXPECT_EQ(charts[0].title, "ch19:fp8_gemm: TFLOP/s per size at scale_block=0");
  EXPECT_EQ(charts[1].title, "ch19:fp8_gemm: TFLOP/s per size at scale_block=128");
  EXPECT_EQ(charts[0].x_values, (std::vector<double>{4096, 8192}));
  EXPECT_EQ(charts[0].series.size(), 8u);
  EXPECT_TRUE(charts[0].not_drawn.empty());
  ASSERT_EQ(charts[1].series.size(), 4u); // 01, 05, 06 and cuBLASLt; the rest SKIPPED
  EXPECT_EQ(charts[1].not_drawn.size(), 4u);
  EXPECT_EQ(charts[1].not_drawn[0], "02_wgmma_fp8 (SKIPPED)");
  // A variant keeps its colour across the ladder's charts.
  EXPECT_EQ(charts[0].series[5].label, "06_persistent_promoted");
  EXPECT_EQ(charts[1].series[2].label, "06_persistent_promoted");
  EXPECT_EQ(charts[0].series[5].colour, charts[1].series[2].colour);
  // y is the achieved TFLOP/s, in x order.
  const auto& p04 = charts[0].series[3];
  ASSERT_EQ(p04.points.size(), 2u);
  EXPECT_EQ(p04.points[0].x, 4096);
  EXPECT_NEAR(p04.points[0].y, 1160.8, 0.1);
  EXPECT_NEAR(p04.points[1].y, 1245.8, 0.1);
  EXPECT_NE(p04.points[1].note.find("04_persistent at size=8192: 1246 TFLOP/s, median"),
            std::string::npos)
      << p04.points[1].note;

  const std::string svg = render_sweep_svg(charts[0]);
  EXPECT_EQ(svg.rfind("<svg class=\"aisp-sweep\"", 0), 0u);
  EXPECT_EQ(polyline_sizes(svg), std::vector<std::size_t>(8, 2));
  EXPECT_EQ(count_of(svg, "<circle "), 16u);
  EXPECT_EQ(count_of(svg, "class=\"legend-entry\""), 8u);
  EXPECT_EQ(count_of(svg, "stroke-dasharray=\"6 4\""), 4u); // two vendor lines, two legend keys
  EXPECT_NE(svg.find("achieved TFLOP/s"), std::string::npos);
  EXPECT_NE(svg.find(">size<"), std::string::npos);
  const std::string svg2 = render_sweep_svg(charts[1]);
  EXPECT_EQ(polyline_sizes(svg2), std::vector<std::size_t>(4, 2));
  EXPECT_NE(svg2.find("no PASS point:"), std::string::npos);
  EXPECT_NE(svg2.find("04_persistent (SKIPPED)"), std::string::npos);
}

TEST(ReportSweep, AxesScalesAndTheTimeFallback) {
  // Nine powers of two of one axis: log2 x; no declared work: y is the median time.
  LoadedRun run = load_run(k_run_a);
  const TargetResult base = run.results.targets[0];
  run.results.targets.clear();
  for (int i = 0; i < 9; ++i) {
    TargetResult t = base;
    t.axes["n"] = std::int64_t{1} << (20 + i);
    t.bytes_per_launch = 0;
    for (auto& v : t.variants) {
      if (v.stats)
        v.stats->median *= (1 << i);
    }
    run.results.targets.push_back(t);
  }
  const auto charts = sweep_charts_of(group_ladders(run.results).at(0));
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_TRUE(charts[0].x_log);
  EXPECT_TRUE(charts[0].y_log); // 256x apart
  EXPECT_EQ(charts[0].y_label, "median time (ms)");
  const std::string svg = render_sweep_svg(charts[0]);
  EXPECT_EQ(polyline_sizes(svg), std::vector<std::size_t>(charts[0].series.size(), 9));
  EXPECT_NE(svg.find(">2^20<"), std::string::npos);
  EXPECT_NE(svg.find("n (log2 scale)"), std::string::npos);
}

// An omit_at_default axis (here `shape`) is left out of the points at its default: it is never the x axis,
// and its points are never drawn on one line with the others; each value, absence included, is a chart.
TEST(ReportSweep, AnAxisSomePointsLackSplitsTheChartsAndIsNeverX) {
  LoadedRun run = load_run(k_run_a);
  const TargetResult base = run.results.targets[0];
  run.results.targets.clear();
  for (const std::int64_t shape : {0, 1, 2}) {
    for (const std::int64_t n : {std::int64_t{1} << 20, std::int64_t{1} << 24}) {
      TargetResult t = base;
      t.axes = {{"n", n}};
      if (shape != 0)
        t.axes["shape"] = shape;
      run.results.targets.push_back(t);
    }
  }
  const auto groups = group_ladders(run.results);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].swept_axes, std::vector<std::string>{"n"});
  EXPECT_EQ(groups[0].partial_axes, std::vector<std::string>{"shape"});
  const auto charts = sweep_charts_of(groups[0]);
  ASSERT_EQ(charts.size(), 3u);
  EXPECT_EQ(charts[0].x_label, "n");
  EXPECT_EQ(charts[0].title.find(" at "), std::string::npos) << charts[0].title;
  EXPECT_NE(charts[1].title.find(" at shape=1"), std::string::npos) << charts[1].title;
  EXPECT_NE(charts[2].title.find(" at shape=2"), std::string::npos) << charts[2].title;
  for (const auto& c : charts) {
    EXPECT_EQ(c.x_values, (std::vector<double>{1 << 20, 1 << 24})) << c.title;
    for (const auto& s : c.series) EXPECT_LE(s.points.size(), 2u) << c.title << " " << s.label;
  }
  // Only the axis some points lack varies: no x axis, no chart, and the page still renders every point.
  for (auto& t : run.results.targets) t.axes.erase("n");
  run.results.targets.resize(3);
  run.results.targets[1].axes = {{"shape", 1}};
  run.results.targets[2].axes = {{"shape", 2}};
  const auto only = group_ladders(run.results);
  EXPECT_TRUE(only[0].swept_axes.empty());
  EXPECT_TRUE(sweep_charts_of(only[0]).empty());
  const std::string html = render_html_report(run);
  EXPECT_NE(html.find("shape = 1, 2 or left out"), std::string::npos);
}

// A ch09:intensity-like sweep: FLOPs per byte from 0.25 to 64 over the points.
TEST(ReportSweep, PointsOfDifferentIntensityShareOneRoofline) {
  LoadedRun run = load_run(k_run_b);
  const TargetResult base = run.results.targets[0];
  run.results.targets.clear();
  for (int f : {1, 16, 256}) {
    TargetResult t = base;
    t.axes["fma_per_elem"] = f;
    t.flops_per_launch = t.bytes_per_launch * f / 4;
    for (auto& v : t.variants) {
      v.tflop_per_s = v.gb_per_s * f / 4 * 1e-3;
      if (v.roofline)
        v.roofline->intensity = f / 4.0;
    }
    run.results.targets.push_back(t);
  }
  const auto groups = group_ladders(run.results);
  ASSERT_TRUE(intensity_differs(groups.at(0)));
  const roofline::Chart chart = ladder_roofline_of(run.results, groups[0]);
  EXPECT_EQ(chart.points.size(), 15u); // 5 placed variants x 3 points
  EXPECT_EQ(chart.points[0].label, "01_chunked fma_per_elem=1");
  EXPECT_EQ(chart.points[14].label, "vendor_memcpy fma_per_elem=256");
  const std::string html = render_html_report(run);
  EXPECT_EQ(count_of(html, "<figure class=\"roofline\">"), 1u);
  const auto at = html.find("<figure class=\"roofline\">");
  const std::string roofline = html.substr(at, html.find("</figure>", at) - at);
  EXPECT_EQ(count_of(roofline, "<circle "), 15u);
  // The roofline comes before the folded points, none of which draws its own.
  EXPECT_LT(at, html.find("<details class=\"point\""));
  // Points of one intensity (a size sweep) keep a roofline each, in their details.
  LoadedRun sizes = load_run(k_run_b);
  TargetResult small = sizes.results.targets[0];
  small.axes["n"] = 1 << 20;
  sizes.results.targets.push_back(small);
  EXPECT_FALSE(intensity_differs(group_ladders(sizes.results).at(0)));
  const std::string two = render_html_report(sizes);
  EXPECT_EQ(count_of(two, "<figure class=\"roofline\">"), 2u);
  EXPECT_GT(two.find("<figure class=\"roofline\">"), two.find("<details class=\"point\""));
}

TEST(ReportHtml, SummaryTableAndSweepSectionOfTheCh19Run) {
  const LoadedRun run = load_run(k_run_ch19);
  const std::string html = render_html_report(run);
  const auto summary = html.find("<table class=\"summary\">");
  ASSERT_NE(summary, std::string::npos);
  // The summary opens the page, before any ladder.
  EXPECT_LT(summary, html.find("<section class=\"ladder\""));
  EXPECT_NE(html.find("<td><a href=\"#t-ch19-fp8-gemm\">ch19:fp8_gemm</a></td><td>4</td>"
                      "<td>04_persistent <span class=\"note\">at 2/4 points</span></td>"
                      "<td>66.8\u201371.7%</td><td>0.88\u20130.92x</td><td>1.85\u20131.94x</td>"
                      "<td class=\"verdict-PASS\">24 PASS, 8 SKIPPED</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<section class=\"ladder\" id=\"t-ch19-fp8-gemm\">"), std::string::npos);
  EXPECT_EQ(count_of(html, "<svg class=\"aisp-sweep\""), 2u);
  EXPECT_EQ(count_of(html, "<details class=\"point\""), 4u);
  EXPECT_NE(html.find("id=\"t-ch19-fp8-gemm-scale-block-128-size-8192\""), std::string::npos);
  EXPECT_NE(html.find("4 points: scale_block = 0, 128; size = 4096, 8192"), std::string::npos);
  // size changes the intensity: one roofline for the ladder, with every placed variant.
  EXPECT_EQ(count_of(html, "<figure class=\"roofline\">"), 1u);
  const std::string md = render_markdown_report(run);
  EXPECT_NE(md.find("## Summary"), std::string::npos);
  EXPECT_NE(md.find("| ch19:fp8_gemm | 4 | 04_persistent (at 2/4 points) | 66.8\u201371.7% |"),
            std::string::npos)
      << md.substr(0, 2000);
  EXPECT_NE(md.find("### ch19:fp8_gemm scale_block=128 size=4096"), std::string::npos);
}

TEST(ReportMerge, RunsOfOneMachineBecomeOneReport) {
  const LoadedRun full = load_run(k_run_ch19);
  LoadedRun a = full, b = full;
  a.results.run_id = "A";
  b.results.run_id = "B";
  a.results.targets.resize(2);
  b.results.targets.erase(b.results.targets.begin(), b.results.targets.begin() + 2);
  b.results.targets.push_back(full.results.targets[1]); // measured again by B
  b.results.targets.back().variants[0].reason = "from B";
  std::vector<std::string> replaced;
  const LoadedRun m = merge_runs({a, b}, &replaced);
  EXPECT_EQ(m.results.run_id, "A + B");
  ASSERT_EQ(m.results.targets.size(), 4u);
  EXPECT_EQ(m.results.targets[1].variants[0].reason, "from B"); // the later run wins
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced[0], "ch19:fp8_gemm scale_block=128 size=4096 from B");
  EXPECT_EQ(summarize_ladders(m, {}).at(0).verdicts, "24 PASS, 8 SKIPPED");
  const std::string html = render_html_report(m);
  EXPECT_NE(html.find("<dt>run</dt><dd>A ("), std::string::npos);
  EXPECT_NE(html.find("<dt>run</dt><dd>B ("), std::string::npos);
  EXPECT_EQ(count_of(html, "<svg class=\"aisp-sweep\""), 2u);
  // One run is itself.
  EXPECT_EQ(merge_runs({a}).results.run_id, "A");
}

// A curriculum over many invocations (here ch19 after ch07, as a session measured them): the report puts
// the ladders in curriculum order and names the first run and how many others.
TEST(ReportMerge, ManyRunsAreNamedByTheFirstAndSortedByLadder) {
  LoadedRun late = load_run(k_run_ch19), early = load_run(k_run_a), third = load_run(k_run_a);
  late.results.run_id = "R1";
  early.results.run_id = "R2";
  third.results.run_id = "R3";
  third.results.targets.clear();
  const LoadedRun m = merge_runs({late, early, third});
  EXPECT_EQ(m.results.run_id, "R1 and 2 other runs");
  ASSERT_FALSE(m.results.targets.empty());
  EXPECT_EQ(m.results.targets.front().name, "ch07:copy");
  EXPECT_EQ(m.results.targets.back().name, "ch19:fp8_gemm");
  const auto rows = summarize_ladders(m, {});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].ladder, "ch07:copy");
}

TEST(ReportMerge, DifferentHardwareIsRefused) {
  LoadedRun a = load_run(k_run_ch19), b = load_run(k_run_a);
  b.results.hardware_key = "h200";
  try {
    merge_runs({a, b});
    FAIL() << "merged runs of two machines";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("different hardware"), std::string::npos);
    EXPECT_NE(what.find("(h100_sxm)"), std::string::npos);
    EXPECT_NE(what.find("(h200)"), std::string::npos);
    EXPECT_EQ(what.find('\n'), std::string::npos); // one line
  }
  EXPECT_THROW(merge_runs({}), UsageError);
}

} // namespace
