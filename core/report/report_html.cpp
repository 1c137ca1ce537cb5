#include "core/report/report_html.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "core/report/report_markdown.hpp"
#include "core/report/report_summary.hpp"
#include "core/report/report_sweep.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

namespace {

constexpr const char* k_style = R"css(
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: 13px; margin: .8em 0; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 14px; }
dl.facts dt { color: #666; } dl.facts dd { margin: 0; }
.config { color: #555; } .note { color: #666; font-style: italic; }
td.verdict-PASS { color: #1e7b34; } td.verdict-bad { color: #c0392b; font-weight: bold; }
figure { margin: 1em 0; overflow-x: auto; } figcaption { color: #555; font-size: 13px; }
table.summary td:nth-child(n+2):nth-child(-n+6) { white-space: nowrap; }
td[title] { cursor: help; text-decoration: underline dotted; }
details.point { margin: .6em 0; border: 1px solid #e3e3e3; padding: .3em .8em; }
details.point > summary { cursor: pointer; font-weight: 600; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 12px; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
)css";

std::string html_table(const TextTable& t) {
  std::string out = "<table class=\"results\"><thead><tr>";
  for (const auto& h : t.header)
    out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& r : t.rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::string cls;
      if (i + 1 == r.size() && i + 1 == t.header.size() && t.header[i] == "verdict") {
        cls = r[i].rfind("PASS", 0) == 0 ? " class=\"verdict-PASS\"" : " class=\"verdict-bad\"";
      }
      out += "<td" + cls + ">" + html_escape(r[i]) + "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

const char* k_legend =
    "<p class=\"legend\"><span><i style=\"background:#8c8c8c\"></i>baseline</span>"
    "<span><i style=\"background:#3d6fb6\"></i>step</span><span><i "
    "style=\"background:#2e8b57\"></i>optimized</span>"
    "<span><i style=\"background:#e8710a;outline:1px dashed #8a3c00\"></i>vendor "
    "reference</span></p>";

} // namespace

LadderChart ladder_chart_of(const TargetResult& t) {
  LadderChart c;
  c.title = t.name + ": median time per variant";
  const bool compute = t.flops_per_launch > 0 && t.flops_per_launch >= t.bytes_per_launch;
  c.throughput_unit = compute ? "TFLOP/s" : "GB/s";
  for (const auto& v : t.variants) {
    LadderBar b;
    b.label = v.name.rfind(t.name + ":", 0) == 0 ? v.name.substr(t.name.size() + 1) : v.name;
    b.kind = std::string(to_string(v.kind));
    b.verdict = std::string(to_string(v.verdict));
    b.reason = v.reason;
    if (v.stats) {
      b.median_ms = v.stats->median;
      b.ci_low_ms = v.stats->median_ci.low;
      b.ci_high_ms = v.stats->median_ci.high;
    }
    b.percent_of_ceiling = percent_of_ceiling(v);
    if (b.percent_of_ceiling && c.ceiling.empty())
      c.ceiling = v.roofline->ceiling;
    b.throughput = compute ? v.tflop_per_s : v.gb_per_s;
    c.bars.push_back(std::move(b));
  }
  return c;
}

roofline::Chart roofline_of(const LoadedRun& run, const TargetResult& t) {
  RunResults one = run.results;
  one.targets.clear();
  one.targets.push_back(t);
  roofline::Chart chart = roofline::chart_of(one);
  chart.title = point_title(run.results, t) + ": roofline against the measured ceilings";
  return chart;
}


namespace {

std::string roofline_note(const RunResults& r) {
  return fmt::format("<p class=\"note\">Roofline not drawn: {}.</p>\n",
                     !r.ceilings ? "these results carry no ceilings (the run predates them or did not "
                                   "look them up)"
                     : !r.ceilings->problem.empty()
                         ? html_escape("no ceilings for this run: " + r.ceilings->problem)
                         : std::string("no variant was placed against them"));
}

// One point's bar chart, roofline (unless the ladder draws one for all its points) and table.
std::string point_body(const LoadedRun& run, const TargetResult& t, bool with_roofline) {
  const std::string point = point_title(run.results, t);
  std::string out;
  out += "<p class=\"config\">" + html_escape(target_config(t)) + "</p>\n";
  LadderChart ladder = ladder_chart_of(t);
  ladder.title = point + ": median time per variant";
  out += "<figure class=\"ladder\">" + render_ladder_svg(ladder) +
         "<figcaption>Median time per variant with the 95% interval of the median; right: percent "
         "of the measured ceiling where the results carry one, else throughput from the declared "
         "work. Variants that did not pass show their verdict instead of a bar.</figcaption>" +
         k_legend + "</figure>\n";
  if (with_roofline) {
    // Drawn only from data the run carries: ceilings it was placed against and placed variants.
    const roofline::Chart chart = roofline_of(run, t);
    out += !chart.roofs.empty() && !chart.points.empty()
               ? "<figure class=\"roofline\">" + roofline::render_svg(chart) + "</figure>\n"
               : roofline_note(run.results);
  }
  out += html_table(report_table(t)) + "\n";
  out += "<p>Verdicts: " + html_escape(verdict_counts(t)) +
         ". Speedups are medians' ratios with bootstrap 95% intervals; (n.s.) marks an interval "
         "that includes 1 or a median under 10x the timer's noise floor.</p>\n";
  return out;
}

std::string section_head(const std::string& name, const std::string& summary) {
  std::string out = fmt::format("<section class=\"ladder\" id=\"{}\">\n<h2>{}</h2>\n",
                                report_anchor(name), html_escape(name));
  if (!summary.empty())
    out += "<p>" + html_escape(summary) + "</p>\n";
  return out;
}

// A ladder measured at one point: its chart, roofline and table, as they always were.
std::string point_section(const LoadedRun& run, const TargetResult& t) {
  return section_head(t.name, t.summary) + point_body(run, t, true) + "</section>\n";
}

// A swept ladder: its sweep charts, one roofline with every point when their arithmetic intensity
// differs, then each point's chart and table folded.
std::string sweep_section(const LoadedRun& run, const LadderGroup& g) {
  const TargetResult& first = *g.points.front();
  std::string out = section_head(g.name, first.summary);
  std::vector<std::string> swept;
  for (const auto& a : g.swept_axes) {
    std::vector<std::int64_t> values;
    for (const auto* t : g.points) {
      const auto v = t->axes.at(a);
      if (std::find(values.begin(), values.end(), v) == values.end())
        values.push_back(v);
    }
    swept.push_back(fmt::format("{} = {}", a, fmt::join(values, ", ")));
  }
  for (const auto& a : g.partial_axes) {
    std::vector<std::int64_t> values;
    for (const auto* t : g.points) {
      const auto it = t->axes.find(a);
      if (it != t->axes.end() && std::find(values.begin(), values.end(), it->second) == values.end())
        values.push_back(it->second);
    }
    swept.push_back(fmt::format("{} = {} or left out", a, fmt::join(values, ", ")));
  }
  out += fmt::format("<p class=\"config\">{} points: {}; {} L2, {} clock.</p>\n", g.points.size(),
                     html_escape(fmt::format("{}", fmt::join(swept, "; "))), to_string(first.mode),
                     to_string(first.clock));
  for (const auto& chart : sweep_charts_of(g)) {
    out += "<figure class=\"sweep\">" + render_sweep_svg(chart) +
           "<figcaption>One line per variant through its PASS points; hover a point for its "
           "value and median time. Dashed: vendor reference.</figcaption></figure>\n";
  }
  const bool one_roofline = intensity_differs(g);
  if (one_roofline) {
    const roofline::Chart chart = ladder_roofline_of(run.results, g);
    if (!chart.roofs.empty() && !chart.points.empty()) {
      // Room for the labels of every point: the roofline stacks those at one intensity.
      const int height = std::max(600, 160 + 14 * static_cast<int>(chart.points.size()));
      out += "<figure class=\"roofline\">" + roofline::render_svg(chart, 960, height) +
             "</figure>\n";
    } else {
      out += roofline_note(run.results);
    }
  }
  out += "<p>Verdicts over all points: " + html_escape(verdict_counts(g.points)) + ".</p>\n";
  for (const auto* t : g.points) {
    const std::string point = point_title(run.results, *t);
    out += fmt::format("<details class=\"point\" id=\"{}\"><summary>{} \u2014 {}</summary>\n",
                       report_anchor(point), html_escape(point), html_escape(verdict_counts(*t)));
    out += point_body(run, *t, !one_roofline) + "</details>\n";
  }
  return out + "</section>\n";
}

std::string summary_section(const std::vector<LadderSummary>& rows) {
  std::string out =
      "<section id=\"summary\">\n<h2>Summary</h2>\n<table class=\"summary\"><thead><tr>"
      "<th>ladder</th><th>points</th><th>best step</th><th>% of ceiling</th>"
      "<th>speed vs vendor</th><th>speedup vs baseline</th><th>verdicts</th>"
      "<th>vs stored expectations</th></tr></thead><tbody>";
  for (const auto& r : rows) {
    std::string best = r.best.empty() ? "-" : html_escape(r.best);
    if (!r.best.empty() && r.best_points < r.points)
      best += fmt::format(" <span class=\"note\">at {}/{} points</span>", r.best_points, r.points);
    out += fmt::format(
        "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td class=\"{}\">{}</td><td{}{}>{}</td></tr>",
        report_anchor(r.ladder), html_escape(r.ladder), r.points, best,
        format_range(r.percent_of_ceiling, "%", 1), format_range(r.fraction_of_vendor, "x", 2),
        format_range(r.speedup_vs_baseline, "x", 2), r.all_pass ? "verdict-PASS" : "verdict-bad",
        html_escape(r.verdicts), r.expectations_bad ? " class=\"verdict-bad\"" : "",
        r.expectations_detail.empty() ? "" : " title=\"" + html_escape(r.expectations_detail) + "\"",
        html_escape(r.expectations));
  }
  out += "</tbody></table>\n<p class=\"note\">Best step: the fastest PASS variant that is not a "
         "vendor reference, at most points of a sweep; its % of ceiling, speed relative to the "
         "vendor reference (1x = as fast) and speedup over the baseline, as a range over the points "
         "where it passed. Verdicts count every variant at every point. The last column is what "
         "aisp bench check says against the stored expectations (hover for details).</p>\n"
         "</section>\n";
  return out;
}

// The page up to the opening of <body>, with its <h1>.
std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // No network and no scripts: the page must read the same offline, in a CI artifact, years
      // later.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      html_escape(title) + "</title>\n<style>" + k_style + "</style>\n</head>\n<body>\n" +
      "<h1>" + html_escape(title) + "</h1>\n";
}

} // namespace

std::string render_html_report(const LoadedRun& run, const ReportOptions& options,
                               const std::vector<LoadgenFile>& serving) {
  std::string out = page_head("aisp run " + run.results.run_id);
  out += "<dl class=\"facts\">";
  for (const auto& [k, v] : run_facts(run))
    out += "<dt>" + html_escape(k) + "</dt><dd>" + html_escape(v) + "</dd>";
  out += "</dl>\n";
  out += summary_section(summarize_ladders(run, options));
  for (const auto& g : group_ladders(run.results))
    out += g.points.size() > 1 ? sweep_section(run, g) : point_section(run, *g.points.front());
  out += render_serving_html(serving);
  out += "<section id=\"manifest\">\n<h2>Manifest</h2>\n";
  if (run.manifest.is_null()) {
    out += "<p class=\"note\">This run folder has no manifest.json.</p>\n";
  } else {
    out += "<details><summary>manifest.json</summary><pre>" + html_escape(run.manifest.dump(2)) +
           "</pre></details>\n";
  }
  out +=
      "</section>\n<footer><p class=\"note\">Generated by aisp report from results.json (schema v" +
      std::to_string(run.results.schema_version) + ").</p></footer>\n</body>\n</html>\n";
  return out;
}

std::string render_html_report(const std::vector<LoadgenFile>& serving) {
  return page_head("aisp serving report") + render_serving_html(serving) +
         "<footer><p class=\"note\">Generated by aisp report from aisp loadgen files (schema " +
         std::string(k_loadgen_schema) + ").</p></footer>\n</body>\n</html>\n";
}

} // namespace aisp
