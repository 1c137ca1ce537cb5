#include "core/report/report_charts.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/results/render.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

namespace {

constexpr const char* k_font = "font-family=\"system-ui, sans-serif\" font-size=\"12\"";

const char* kind_color(const std::string& kind) {
  if (kind == "baseline")
    return "#8c8c8c";
  if (kind == "optimized")
    return "#2e8b57";
  if (kind == "vendor")
    return "#e8710a";
  return "#3d6fb6";
}

std::string tick_label(double v) {
  std::string s = fmt::format("{:.6g}", v);
  return s;
}

struct Panel {
  double x0, width, max;
  double px(double v) const { return x0 + width * std::clamp(v / max, 0.0, 1.0); }
};

std::string axis(const Panel& p, double y_top, double y_bottom, const std::vector<double>& ticks,
                 const std::string& title) {
  std::string out;
  for (double t : ticks) {
    const double x = p.px(t);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/>", x,
        y_top, x, y_bottom);
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#555\">{}</text>", x,
        y_bottom + 14, tick_label(t));
  }
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
      p.x0 + p.width / 2, y_top - 10, html_escape(title));
  return out;
}

} // namespace

std::vector<double> nice_ticks(double max) {
  if (!(max > 0))
    return {0, 1};
  const double raw = max / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw)
      break;
  }
  std::vector<double> ticks;
  for (int i = 0; i * step <= max * (1 + 1e-9) + step; ++i) {
    ticks.push_back(i * step);
    if (i * step >= max)
      break;
  }
  return ticks;
}

std::string render_ladder_svg(const LadderChart& c) {
  const double row = 28, top = 44, label_w = 190, gap = 70, panel_w = 300;
  const double height = top + row * static_cast<double>(c.bars.size()) + 34;
  const double width = label_w + panel_w + gap + panel_w + 80;
  const bool have_pct = std::any_of(c.bars.begin(), c.bars.end(), [](const LadderBar& b) {
    return b.verdict == "PASS" && b.percent_of_ceiling.has_value();
  });
  double max_ms = 0, max_right = 0;
  for (const auto& b : c.bars) {
    if (b.verdict != "PASS" || !b.median_ms)
      continue;
    max_ms = std::max({max_ms, *b.median_ms, b.ci_high_ms.value_or(0)});
    max_right = std::max(max_right, have_pct ? b.percent_of_ceiling.value_or(0) : b.throughput);
  }
  if (have_pct)
    max_right = std::max(max_right, 100.0);
  const auto left_ticks = nice_ticks(max_ms);
  const auto right_ticks = nice_ticks(max_right);
  const Panel left{label_w, panel_w, left_ticks.back() > 0 ? left_ticks.back() : 1};
  const Panel right{label_w + panel_w + gap, panel_w,
                    right_ticks.back() > 0 ? right_ticks.back() : 1};
  const double bottom = top + row * static_cast<double>(c.bars.size());

  std::string out = fmt::format("<svg class=\"aisp-ladder\" xmlns=\"http://www.w3.org/2000/svg\" "
                                "width=\"{:.0f}\" height=\"{:.0f}\" "
                                "viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\" {}>",
                                width, height, width, height, k_font);
  out += "<title>" + html_escape(c.title) + "</title>";
  out += axis(left, top, bottom, left_ticks, "median time (ms), whisker: 95% CI of the median");
  out += axis(right, top, bottom, right_ticks,
              have_pct
                  ? "% of the measured ceiling" + (c.ceiling.empty() ? "" : " (" + c.ceiling + ")")
                  : "throughput (" + c.throughput_unit + ")");
  if (have_pct) {
    const double x = right.px(100);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c0392b\" "
        "stroke-dasharray=\"4 3\"/>",
        x, top - 4, x, bottom);
  }
  for (std::size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    const double y = top + row * static_cast<double>(i);
    const bool vendor = b.kind == "vendor";
    out += fmt::format("<g class=\"bar {}\">", html_escape(b.kind));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\"{}>{}{}</text>",
                       label_w - 8, y + row / 2 + 4, vendor ? " font-style=\"italic\"" : "",
                       html_escape(b.label), vendor ? " (vendor)" : "");
    if (b.verdict != "PASS" || !b.median_ms) {
      const std::string why = b.verdict + (b.reason.empty() ? "" : ": " + b.reason);
      const std::string shown = why.size() > 90 ? why.substr(0, 87) + "..." : why;
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c0392b\">{}<title>{}</title></text></g>",
          left.x0 + 4, y + row / 2 + 4, html_escape(shown), html_escape(why));
      continue;
    }
    const char* color = kind_color(b.kind);
    const std::string stroke =
        vendor ? " stroke=\"#8a3c00\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"" : "";
    const double bar_y = y + 5, bar_h = row - 10;
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}>"
        "<title>{}: {}</title></rect>",
        left.x0, bar_y, left.px(*b.median_ms) - left.x0, bar_h, color, stroke, html_escape(b.label),
        format_duration_ms(*b.median_ms));
    if (b.ci_low_ms && b.ci_high_ms) {
      const double x1 = left.px(*b.ci_low_ms), x2 = left.px(*b.ci_high_ms), ym = y + row / 2;
      out +=
          fmt::format("<path d=\"M{:.1f} {:.1f}H{:.1f}M{:.1f} {:.1f}V{:.1f}M{:.1f} {:.1f}V{:.1f}\" "
                      "stroke=\"#222\" fill=\"none\"/>",
                      x1, ym, x2, x1, ym - 5, ym + 5, x2, ym - 5, ym + 5);
    }
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#222\">{}</text>",
                       left.px(b.ci_high_ms.value_or(*b.median_ms)) + 6, y + row / 2 + 4,
                       format_duration_ms(*b.median_ms));
    const double value = have_pct ? b.percent_of_ceiling.value_or(0) : b.throughput;
    const std::string shown = have_pct
                                  ? (b.percent_of_ceiling ? fmt::format("{:.1f}%", value) : "-")
                                  : fmt::format("{:.4g} {}", value, c.throughput_unit);
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}/>",
        right.x0, bar_y, right.px(value) - right.x0, bar_h, color, stroke);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#222\">{}</text></g>",
                       right.px(value) + 6, y + row / 2 + 4, shown);
  }
  out += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\"/>",
      left.x0, top - 4, bottom);
  out += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\"/>",
      right.x0, top - 4, bottom);
  return out + "</svg>";
}

} // namespace aisp
