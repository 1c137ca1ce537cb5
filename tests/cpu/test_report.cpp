#include <gtest/gtest.h>

#include <regex>

#include "core/results/expectations.hpp"
#include "core/report/report_charts.hpp"
#include "core/report/report_html.hpp"
#include "core/report/report_markdown.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

// The first <svg class="..."> element of a page.
std::string svg_of(const std::string& html, const std::string& cls) {
  const auto b = html.find("<svg class=\"" + cls + "\"");
  if (b == std::string::npos)
    return {};
  return html.substr(b, html.find("</svg>", b) + 6 - b);
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
    ++n;
  return n;
}

// The roofline SVG is core/results/roofline.hpp's, with golden tests of its own: here it is a placeholder,
// so that these golden pages cover this page's layout and change only with it.
std::string without_roofline_svg(std::string html) {
  const std::string open = "<figure class=\"roofline\">";
  const auto b = html.find(open);
  if (b == std::string::npos)
    return html;
  const auto e = html.find("</figure>", b);
  return html.replace(b + open.size(), e - b - open.size(), "[roofline SVG]");
}

TEST(ReportHtml, GoldenPagesOfTheTwoFixtureRuns) {
  expect_golden(without_roofline_svg(render_html_report(load_run(k_run_a))), "report_run_a.html");
  const std::string b = render_html_report(load_run(k_run_b));
  EXPECT_NE(without_roofline_svg(b), b); // run B has a roofline
  expect_golden(without_roofline_svg(b), "report_run_b.html");
}

TEST(ReportHtml, SelfContainedWithTheCharts) {
  const std::string html = render_html_report(load_run(k_run_b));
  // No scripts and nothing fetched: the only URL is the SVG namespace, which is a name, not a
  // request.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  std::string no_ns =
      std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_EQ(no_ns.find("http://"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  // The ladder chart: a time bar and a % of ceiling bar per passing variant (4), the NOISY one
  // named.
  EXPECT_EQ(count_of(html, "<svg class=\"aisp-ladder\""), 1u);
  EXPECT_EQ(count_of(svg_of(html, "aisp-ladder"), "<rect x="), 8u);
  EXPECT_NE(html.find("% of the measured ceiling (dram_copy)"), std::string::npos);
  EXPECT_NE(html.find("NOISY: 95% CI"), std::string::npos);
  EXPECT_NE(html.find("vendor_memcpy (vendor)"), std::string::npos);
  // Run B carries ceilings: its roofline is drawn.
  EXPECT_NE(html.find("<figure class=\"roofline\"><svg"), std::string::npos);
  EXPECT_NE(html.find("48.0%"), std::string::npos);
  EXPECT_NE(html.find("<summary>manifest.json</summary>"), std::string::npos);
  EXPECT_NE(html.find("4b1d0c9e8f (dirty)"), std::string::npos);
}

TEST(ReportHtml, NoCeilingsNoRoofline) {
  const std::string html = render_html_report(load_run(k_run_a));
  EXPECT_EQ(html.find("<figure class=\"roofline\">"), std::string::npos);
  EXPECT_NE(html.find("Roofline not drawn: these results carry no ceilings"), std::string::npos);
  EXPECT_NE(html.find("throughput (GB/s)"), std::string::npos); // the right panel falls back
  EXPECT_EQ(count_of(svg_of(html, "aisp-ladder"), "<rect x="), 10u);
}

TEST(ReportMarkdown, GoldenReport) {
  expect_golden(render_markdown_report(load_run(k_run_b)), "report_run_b.md");
}

TEST(LadderSvg, BarsWhiskersVendorAndFailures) {
  LadderChart c;
  c.title = "t <&>";
  c.throughput_unit = "GB/s";
  c.bars.push_back({"01_a", "baseline", "PASS", "", 4.0, 3.9, 4.2, std::nullopt, 100});
  c.bars.push_back({"02_b", "step", "FAIL", "2 of 10 elements out of tolerance", std::nullopt,
                    std::nullopt, std::nullopt, std::nullopt, 0});
  c.bars.push_back({"vendor_c", "vendor", "PASS", "", 1.0, 0.95, 1.05, std::nullopt, 400});
  const std::string svg = render_ladder_svg(c);
  EXPECT_EQ(svg.rfind("<svg class=\"aisp-ladder\"", 0), 0u);
  EXPECT_NE(svg.find("<title>t &lt;&amp;&gt;</title>"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<rect "), 4u);                        // two passing variants, two panels
  EXPECT_EQ(count_of(svg, "stroke=\"#222\" fill=\"none\""), 2u); // whiskers
  EXPECT_NE(svg.find("FAIL: 2 of 10 elements"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray=\"3 2\""), std::string::npos); // the vendor bar is marked
  EXPECT_NE(svg.find("vendor_c (vendor)"), std::string::npos);
  // The longest bar (4.2 ms upper whisker on a 0..5 axis) ends inside its panel.
  expect_golden(svg + "\n", "ladder_chart.svg");
}

TEST(ReadmeTables, MarkersAreReplacedExactlyOnce) {
  const std::string text = "a\n<!-- aisp:results:begin -->\nold\n<!-- aisp:results:end -->\nb\n";
  EXPECT_EQ(*replace_marked_section(text, "new"),
            "a\n<!-- aisp:results:begin -->\nnew\n<!-- aisp:results:end -->\nb\n");
  EXPECT_FALSE(replace_marked_section("no markers", "x"));
  EXPECT_FALSE(replace_marked_section("<!-- aisp:results:end --><!-- aisp:results:begin -->", "x"));
  EXPECT_FALSE(replace_marked_section(text + text, "x"));
}

TEST(ReadmeTables, RegeneratedFromExpectationsAndIdempotent) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  update_expectations(load_run(k_run_a), chapters);
  LoadedRun h200 = load_run(k_run_b);
  h200.results.hardware_key = "h200";
  update_expectations(h200, chapters);
  auto updates = update_readmes(chapters, {});
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_TRUE(updates[0].written) << updates[0].error;
  const std::string readme = slurp(updates[0].readme);
  EXPECT_EQ(readme.find("typed by hand"), std::string::npos);
  EXPECT_EQ(readme.rfind("# ch07:copy\n\nWhat the ladder teaches.", 0), 0u);
  EXPECT_NE(readme.find("After the table.\n"), std::string::npos);
  EXPECT_LT(readme.find("**h100_sxm**"), readme.find("**h200**"));
  expect_golden(readme, "readme_ch07_copy.md");
  // Running it again changes nothing.
  updates = update_readmes(chapters, {});
  EXPECT_FALSE(updates[0].written);
  EXPECT_TRUE(updates[0].error.empty());
  EXPECT_EQ(slurp(updates[0].readme), readme);
}

TEST(ReadmeTables, ProblemsAreReportedAndNothingIsLost) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  // Named but without expectations: said so.
  auto updates = update_readmes(chapters, {"ch07:copy"});
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_NE(updates[0].error.find("no stored expectations"), std::string::npos);
  EXPECT_TRUE(update_readmes(chapters, {}).empty()); // nothing stored, nothing asked
  // A folder of shared code (no problem.hpp) is no ladder, even when its chapter is asked for.
  spit(chapters + "/ch07_memory_access/common/helper.hpp", "// shared\n");
  updates = update_readmes(chapters, {"ch07"});
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].target, "ch07:copy");
  update_expectations(load_run(k_run_a), chapters);
  const std::string readme = chapters + "/ch07_memory_access/copy/README.md";
  spit(readme, "# no markers here\n");
  updates = update_readmes(chapters, {});
  EXPECT_NE(updates[0].error.find("lacks one"), std::string::npos);
  EXPECT_EQ(slurp(readme), "# no markers here\n");
  std::filesystem::remove(readme);
  updates = update_readmes(chapters, {});
  EXPECT_NE(updates[0].error.find("no "), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(readme));
}

// --- sweeps and facts ---

// A run with two points of one target: one section for the ladder, with the sweep chart, and
// each point folded in its own details with its anchor, chart and table, named by its axes.
TEST(ReportHtml, OneSectionPerLadderOneDetailsPerAxisPoint) {
  LoadedRun run = load_run(k_run_a);
  TargetResult small = run.results.targets[0];
  small.axes["n"] = 1 << 20;
  run.results.targets.push_back(small);
  EXPECT_EQ(point_title(run.results, run.results.targets[0]), "ch07:copy n=1073741824");
  EXPECT_EQ(point_title(load_run(k_run_a).results, run.results.targets[0]), "ch07:copy");
  const std::string html = render_html_report(run);
  EXPECT_EQ(count_of(html, "<section class=\"ladder\""), 1u);
  EXPECT_EQ(count_of(html, "<details class=\"point\""), 2u);
  EXPECT_EQ(count_of(html, "<svg class=\"aisp-sweep\""), 1u);
  EXPECT_NE(html.find("id=\"t-ch07-copy-n-1048576\""), std::string::npos);
  EXPECT_NE(html.find("id=\"t-ch07-copy-n-1073741824\""), std::string::npos);
  EXPECT_NE(html.find("href=\"#t-ch07-copy\""), std::string::npos); // the summary row
  EXPECT_NE(html.find("ch07:copy n=1048576: median time per variant"), std::string::npos);
  const std::string md = render_markdown_report(run);
  EXPECT_NE(md.find("### ch07:copy n=1073741824"), std::string::npos) << md;
  EXPECT_NE(md.find("### ch07:copy n=1048576"), std::string::npos);
  EXPECT_EQ(count_of(md, "\n## ch07:copy"), 1u);
}

TEST(ReportMarkdown, FactsColumnWhenVariantsReportFacts) {
  LoadedRun run = load_run(k_run_a);
  EXPECT_EQ(report_table(run.results.targets[0]).header.size(), 9u); // none reported: no column
  run.results.targets[0].variants[0].facts = {{"regs", "32"}, {"occupancy_pct", "50.0"}};
  const TextTable t = report_table(run.results.targets[0]);
  ASSERT_EQ(t.header.size(), 10u);
  EXPECT_EQ(t.header[8], "facts");
  EXPECT_EQ(t.header.back(), "verdict");
  EXPECT_EQ(t.rows[0][8], "regs 32 \u00b7 occ 50%");
  EXPECT_EQ(t.rows[1][8], "");
  EXPECT_NE(render_html_report(run).find("regs 32 \u00b7 occ 50%"), std::string::npos);
}

// Stored sweeps: the README gets one table per point, each headed by its axes.
TEST(ReadmeTables, OneTablePerStoredPoint) {
  ScratchDir dir;
  const std::string chapters = make_chapters(dir);
  LoadedRun run = load_run(k_run_a);
  TargetResult small = run.results.targets[0];
  small.axes["n"] = 1 << 20;
  run.results.targets.push_back(small);
  ASSERT_TRUE(update_expectations(run, chapters)[0].written);
  const auto updates = update_readmes(chapters, {});
  ASSERT_EQ(updates.size(), 1u);
  ASSERT_TRUE(updates[0].written) << updates[0].error;
  const std::string readme = slurp(updates[0].readme);
  EXPECT_EQ(count_of(readme, "| variant |"), 2u) << readme;
  const auto small_at = readme.find("cold L2, gpu clock, n=1048576.");
  const auto large_at = readme.find("cold L2, gpu clock, n=1073741824.");
  ASSERT_NE(small_at, std::string::npos) << readme;
  ASSERT_NE(large_at, std::string::npos) << readme;
  EXPECT_LT(small_at, large_at);
}

} // namespace
