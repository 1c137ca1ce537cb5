#include "core/report_html.hpp"

#include <fmt/format.h>

#include "core/report_markdown.hpp"
#include "core/text_table.hpp"

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
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 12px; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
)css";

std::string anchor(const std::string& name) {
  std::string out = "t-";
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

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

std::string render_html_report(const LoadedRun& run) {
  const std::string title = "aisp run " + run.results.run_id;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // No network and no scripts: the page must read the same offline, in a CI artifact, years
      // later.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      html_escape(title) + "</title>\n<style>" + k_style + "</style>\n</head>\n<body>\n";
  out += "<h1>" + html_escape(title) + "</h1>\n<dl class=\"facts\">";
  for (const auto& [k, v] : run_facts(run))
    out += "<dt>" + html_escape(k) + "</dt><dd>" + html_escape(v) + "</dd>";
  out += "</dl>\n";
  if (run.results.targets.size() > 1) {
    out += "<nav><ul>";
    for (const auto& t : run.results.targets) {
      const std::string title = point_title(run.results, t);
      out += fmt::format("<li><a href=\"#{}\">{}</a> ({})</li>", anchor(title), html_escape(title),
                         html_escape(verdict_counts(t)));
    }
    out += "</ul></nav>\n";
  }
  for (const auto& t : run.results.targets) {
    // One section per axis point of a sweep, each with its own anchor, chart and table.
    const std::string point = point_title(run.results, t);
    out += fmt::format("<section class=\"target\" id=\"{}\">\n<h2>{}</h2>\n", anchor(point),
                       html_escape(point));
    if (!t.summary.empty())
      out += "<p>" + html_escape(t.summary) + "</p>\n";
    out += "<p class=\"config\">" + html_escape(target_config(t)) + "</p>\n";
    LadderChart ladder = ladder_chart_of(t);
    ladder.title = point + ": median time per variant";
    out += "<figure class=\"ladder\">" + render_ladder_svg(ladder) +
           "<figcaption>Median time per variant with the 95% interval of the median; right: "
           "percent of the "
           "measured ceiling where the results carry one, else throughput from the declared work. "
           "Variants "
           "that did not pass show their verdict instead of a bar.</figcaption>" +
           k_legend + "</figure>\n";
    // Drawn only from data the run carries: ceilings it was placed against and placed variants.
    const roofline::Chart chart = roofline_of(run, t);
    if (!chart.roofs.empty() && !chart.points.empty()) {
      out += "<figure class=\"roofline\">" + roofline::render_svg(chart) + "</figure>\n";
    } else {
      out += fmt::format("<p class=\"note\">Roofline not drawn: {}.</p>\n",
                         !run.results.ceilings
                             ? "these results carry no ceilings (the run predates them or did not "
                               "look them up)"
                         : !run.results.ceilings->problem.empty()
                             ? "no ceilings for this run: " + run.results.ceilings->problem
                             : std::string("no variant was placed against them"));
    }
    out += html_table(report_table(t)) + "\n";
    out += "<p>Verdicts: " + html_escape(verdict_counts(t)) +
           ". Speedups are medians' ratios with bootstrap 95% intervals; (n.s.) marks an interval "
           "that "
           "includes 1 or a median under 10x the timer's noise floor.</p>\n</section>\n";
  }
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

} // namespace aisp
