#include "core/report/report_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "core/results/render.hpp"
#include "core/report/report_charts.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

namespace {

// Steps take the palette in ladder order; the baseline is grey and vendor references orange (as in
// the bar chart), so a reader matches lines across a ladder's charts by colour.
constexpr const char* k_palette[] = {"#4e79a7", "#59a14f", "#b07aa1", "#e15759", "#76b7b2",
                                     "#edc948", "#9c755f", "#ff9da7", "#17becf", "#7f3c8d"};
constexpr const char* k_vendor_palette[] = {"#e8710a", "#a0522d", "#d4a017"};

bool power_of_two(double v) {
  const double l = std::log2(v);
  return v >= 1 && std::fabs(l - std::round(l)) < 1e-9;
}

bool wants_log(const std::vector<double>& values, bool powers_of_two_suffice) {
  if (values.empty() || *std::min_element(values.begin(), values.end()) <= 0)
    return false;
  const double lo = *std::min_element(values.begin(), values.end());
  const double hi = *std::max_element(values.begin(), values.end());
  if (hi / lo > 8)
    return true;
  return powers_of_two_suffice && values.size() > 2 &&
         std::all_of(values.begin(), values.end(), power_of_two);
}

// Axis values as people write them: 4096, 2^28 for large powers of two, else 3 significant digits.
std::string axis_value_label(double v) {
  if (v >= 1 << 17 && power_of_two(v))
    return fmt::format("2^{:.0f}", std::log2(v));
  if (std::fabs(v) < 1e5 && v == std::round(v))
    return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

// Which swept axis goes on x (see sweep_charts_of).
std::string pick_x_axis(const LadderGroup& g) {
  std::string best;
  std::size_t best_count = 0;
  double best_span = 0;
  for (const auto& a : g.swept_axes) {
    std::vector<double> values;
    for (const auto* t : g.points) {
      const double v = static_cast<double>(t->axes.at(a));
      if (std::find(values.begin(), values.end(), v) == values.end())
        values.push_back(v);
    }
    const double lo = *std::min_element(values.begin(), values.end());
    const double hi = *std::max_element(values.begin(), values.end());
    const double span = lo > 0 ? hi / lo : 0;
    if (best.empty() || values.size() > best_count ||
        (values.size() == best_count && span > best_span)) {
      best = a;
      best_count = values.size();
      best_span = span;
    }
  }
  return best;
}

enum class Merit { tflops, gbps, time };

Merit merit_of(const LadderGroup& g) {
  std::size_t compute = 0;
  bool all_flops = true, all_bytes = true;
  for (const auto* t : g.points) {
    all_flops = all_flops && t->flops_per_launch > 0;
    all_bytes = all_bytes && t->bytes_per_launch > 0;
    if (t->flops_per_launch > 0 && t->flops_per_launch >= t->bytes_per_launch)
      ++compute;
  }
  if (all_flops && 2 * compute >= g.points.size())
    return Merit::tflops;
  return all_bytes ? Merit::gbps : Merit::time;
}

double merit_value(Merit m, const VariantResult& v) {
  return m == Merit::tflops ? v.tflop_per_s : m == Merit::gbps ? v.gb_per_s : v.stats->median;
}

std::string merit_text(Merit m, double y) {
  return m == Merit::tflops ? fmt::format("{:.4g} TFLOP/s", y)
         : m == Merit::gbps ? fmt::format("{:.4g} GB/s", y)
                            : format_duration_ms(y);
}

// The value of the axes in `names`, as "a=1 b=2".
std::string axes_text(const AxisValues& axes, const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    const auto it = axes.find(n);
    if (it != axes.end())
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", n, it->second);
  }
  return out;
}

struct Scale {
  double lo, hi, p0, p1; // data range (already log-transformed when log), pixel range
  bool log;
  bool log2;
  double operator()(double v) const {
    const double t = log ? (log2 ? std::log2(v) : std::log10(v)) : v;
    if (hi - lo <= 0)
      return (p0 + p1) / 2;
    return p0 + (t - lo) / (hi - lo) * (p1 - p0);
  }
};

} // namespace

std::vector<SweepChart> sweep_charts_of(const LadderGroup& g) {
  std::vector<SweepChart> charts;
  if (g.swept_axes.empty())
    return charts;
  const std::string x_axis = pick_x_axis(g);
  std::vector<std::string> others = g.partial_axes;  // absent on a point: its own chart too
  for (const auto& a : g.swept_axes) {
    if (a != x_axis)
      others.push_back(a);
  }
  std::sort(others.begin(), others.end());
  const Merit merit = merit_of(g);
  // Every variant of the ladder in order, with its colour.
  std::vector<std::pair<std::string, std::string>> variants; // name, colour
  std::size_t steps = 0, vendors = 0;
  for (const auto* t : g.points) {
    for (const auto& v : t->variants) {
      if (std::any_of(variants.begin(), variants.end(),
                      [&](const auto& x) { return x.first == v.name; }))
        continue;
      const char* colour = v.kind == VariantKind::baseline ? "#8c8c8c"
                           : v.kind == VariantKind::vendor
                               ? k_vendor_palette[vendors++ % std::size(k_vendor_palette)]
                               : k_palette[steps++ % std::size(k_palette)];
      variants.emplace_back(v.name, colour);
    }
  }
  // One chart per combination of the other swept axes, in run order.
  std::vector<std::string> combos;
  for (const auto* t : g.points) {
    const std::string c = axes_text(t->axes, others);
    if (std::find(combos.begin(), combos.end(), c) == combos.end())
      combos.push_back(c);
  }
  for (const auto& combo : combos) {
    SweepChart c;
    c.x_label = x_axis;
    c.y_label = merit == Merit::tflops ? "achieved TFLOP/s (declared FLOPs / median)"
                : merit == Merit::gbps ? "achieved GB/s (declared bytes / median)"
                                       : "median time (ms)";
    c.title = fmt::format("{}: {} per {}{}", g.name,
                          merit == Merit::tflops ? "TFLOP/s"
                          : merit == Merit::gbps ? "GB/s"
                                                 : "median time",
                          x_axis, combo.empty() ? "" : " at " + combo);
    std::vector<const TargetResult*> mine;
    for (const auto* t : g.points) {
      if (axes_text(t->axes, others) == combo) {
        mine.push_back(t);
        const double x = static_cast<double>(t->axes.at(x_axis));
        if (std::find(c.x_values.begin(), c.x_values.end(), x) == c.x_values.end())
          c.x_values.push_back(x);
      }
    }
    std::sort(c.x_values.begin(), c.x_values.end());
    std::vector<double> ys;
    for (const auto& [name, colour] : variants) {
      SweepSeries s;
      s.label = variant_stem(name, g.name);
      s.colour = colour;
      std::vector<std::string> verdicts;
      for (const auto* t : mine) {
        for (const auto& v : t->variants) {
          if (v.name != name)
            continue;
          s.kind = std::string(to_string(v.kind));
          if (v.verdict != Verdict::pass || !v.stats) {
            const std::string vd(to_string(v.verdict));
            if (std::find(verdicts.begin(), verdicts.end(), vd) == verdicts.end())
              verdicts.push_back(vd);
            continue;
          }
          const double x = static_cast<double>(t->axes.at(x_axis));
          const double y = merit_value(merit, v);
          s.points.push_back({x, y,
                              fmt::format("{} at {}={}: {}{}", s.label, x_axis, t->axes.at(x_axis),
                                          merit_text(merit, y),
                                          merit == Merit::time
                                              ? ""
                                              : ", median " + format_duration_ms(v.stats->median))});
          ys.push_back(y);
        }
      }
      std::sort(s.points.begin(), s.points.end(),
                [](const SweepPoint& a, const SweepPoint& b) { return a.x < b.x; });
      if (s.points.empty()) {
        if (!s.kind.empty())
          c.not_drawn.push_back(fmt::format("{} ({})", s.label, fmt::join(verdicts, ", ")));
        continue;
      }
      c.series.push_back(std::move(s));
    }
    c.x_log = wants_log(c.x_values, true);
    c.y_log = merit == Merit::time && wants_log(ys, false);
    charts.push_back(std::move(c));
  }
  return charts;
}

std::string render_sweep_svg(const SweepChart& c) {
  const double width = 960, legend_w = 270, row = 18;
  const double height =
      std::max(380.0, 70 + row * static_cast<double>(c.series.size() + c.not_drawn.size() + 2));
  const double left = 78, right = width - legend_w, top = 36, bottom = height - 56;
  // x: the swept values; a little room at both ends so that markers are not cut.
  const double pad = (right - left) * 0.04;
  double x_lo = c.x_values.empty() ? 0 : c.x_values.front();
  double x_hi = c.x_values.empty() ? 1 : c.x_values.back();
  if (c.x_log) {
    x_lo = std::log2(x_lo);
    x_hi = std::log2(x_hi);
  }
  const Scale sx{x_lo, x_hi, left + pad, right - pad, c.x_log, true};
  double y_max = 0, y_min = 0;
  bool first = true;
  for (const auto& s : c.series) {
    for (const auto& p : s.points) {
      y_max = first ? p.y : std::max(y_max, p.y);
      y_min = first ? p.y : std::min(y_min, p.y);
      first = false;
    }
  }
  std::vector<double> y_ticks;
  Scale sy{0, 1, bottom, top, c.y_log, false};
  if (c.y_log && y_min > 0) {
    const double lo = std::floor(std::log10(y_min)), hi = std::ceil(std::log10(y_max * 1.0001));
    sy.lo = lo;
    sy.hi = std::max(hi, lo + 1);
    for (double e = sy.lo; e <= sy.hi + 1e-9; ++e)
      y_ticks.push_back(std::pow(10.0, e));
  } else {
    sy.log = false;
    y_ticks = nice_ticks(y_max);
    sy.hi = y_ticks.back() > 0 ? y_ticks.back() : 1;
  }

  std::string out = fmt::format(
      "<svg class=\"aisp-sweep\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" "
      "height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" "
      "font-family=\"system-ui, sans-serif\" font-size=\"12\">",
      width, height);
  out += "<title>" + html_escape(c.title) + "</title>";
  out += fmt::format("<text x=\"{:.1f}\" y=\"20\" font-weight=\"bold\">{}</text>", left,
                     html_escape(c.title));
  for (double t : y_ticks) {
    const double y = sy(t);
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" "
                       "stroke=\"#e3e3e3\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" "
                       "fill=\"#555\">{5}</text>",
                       left, y, right, left - 6, y + 4, fmt::format("{:.6g}", t));
  }
  // Every swept value gets a tick, thinned to about twelve when a sweep has more.
  const std::size_t every = c.x_values.size() > 12 ? (c.x_values.size() + 11) / 12 : 1;
  for (std::size_t i = 0; i < c.x_values.size(); i += every) {
    const double x = sx(c.x_values[i]);
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"#e3e3e3\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                       "text-anchor=\"middle\" fill=\"#555\">{4}</text>",
                       x, top, bottom, bottom + 16, axis_value_label(c.x_values[i]));
  }
  out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                     "fill=\"none\" stroke=\"#888\"/>",
                     left, top, right - left, bottom - top);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}{}</text>",
                     (left + right) / 2, bottom + 36, html_escape(c.x_label),
                     c.x_log ? " (log2 scale)" : "");
  out += fmt::format("<text transform=\"translate(18,{:.1f}) rotate(-90)\" "
                     "text-anchor=\"middle\">{}{}</text>",
                     (top + bottom) / 2, html_escape(c.y_label), c.y_log ? " (log scale)" : "");
  for (const auto& s : c.series) {
    const bool vendor = s.kind == "vendor";
    const std::string dash = vendor ? " stroke-dasharray=\"6 4\"" : "";
    const double w = s.kind == "optimized" ? 3.5 : 2.2;
    std::string pts;
    for (const auto& p : s.points)
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", sx(p.x), sy(p.y));
    out += fmt::format("<g class=\"series {}\"><polyline points=\"{}\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"{:.1f}\"{}><title>{}</title></polyline>",
                       html_escape(s.kind), pts, s.colour, w, dash, html_escape(s.label));
    // Vendor markers are hollow, so the reference stays told apart where lines cross.
    for (const auto& p : s.points) {
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" stroke=\"{}\" "
                         "stroke-width=\"1.5\"><title>{}</title></circle>",
                         sx(p.x), sy(p.y), vendor ? "white" : s.colour,
                         vendor ? s.colour : "white", html_escape(p.note));
      if (!p.label.empty()) {
        out += fmt::format("<text class=\"point-label\" x=\"{:.1f}\" y=\"{:.1f}\" "
                           "font-size=\"10\" fill=\"{}\">{}</text>",
                           sx(p.x) + 6, sy(p.y) - 6, s.colour, html_escape(p.label));
      }
    }
    out += "</g>";
  }
  // The legend, right of the plot: every series, then what could not be drawn.
  double ly = top + 6;
  for (const auto& s : c.series) {
    const bool vendor = s.kind == "vendor";
    out += fmt::format("<g class=\"legend-entry\"><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" "
                       "x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" stroke-width=\"{4:.1f}\"{5}/>"
                       "<text x=\"{6:.1f}\" y=\"{7:.1f}\"{8}>{9}</text></g>",
                       right + 16, ly, right + 44, s.colour, s.kind == "optimized" ? 3.5 : 2.2,
                       vendor ? " stroke-dasharray=\"6 4\"" : "", right + 50, ly + 4,
                       vendor ? " font-style=\"italic\"" : "", html_escape(s.label));
    ly += row;
  }
  if (!c.not_drawn.empty()) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#555\">no PASS point:</text>",
                       right + 16, ly + 4);
    ly += row;
    for (const auto& n : c.not_drawn) {
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c0392b\">{}</text>", right + 24,
                         ly + 4, html_escape(n));
      ly += row;
    }
  }
  return out + "</svg>";
}

bool intensity_differs(const LadderGroup& g) {
  std::vector<double> ai;
  for (const auto* t : g.points) {
    ai.push_back(t->bytes_per_launch > 0 ? t->flops_per_launch / t->bytes_per_launch : 0);
  }
  if (ai.size() < 2)
    return false;
  const double lo = *std::min_element(ai.begin(), ai.end());
  const double hi = *std::max_element(ai.begin(), ai.end());
  return hi > 0 && (hi - lo) > 0.01 * hi;
}

roofline::Chart ladder_roofline_of(const RunResults& run, const LadderGroup& g) {
  RunResults one = run;
  one.targets.clear();
  for (const auto* t : g.points)
    one.targets.push_back(*t);
  roofline::Chart chart = roofline::chart_of(one);
  // chart_of places the targets' variants in order: relabel them the same way, naming the point.
  std::size_t i = 0;
  for (const auto* t : g.points) {
    std::vector<std::string> named = g.swept_axes;
    named.insert(named.end(), g.partial_axes.begin(), g.partial_axes.end());
    const std::string at = axes_text(t->axes, named);
    for (const auto& v : t->variants) {
      if (!v.roofline || i >= chart.points.size())
        continue;
      chart.points[i++].label = variant_stem(v.name, g.name) + (at.empty() ? "" : " " + at);
    }
  }
  chart.title = fmt::format("{}: all {} points against the measured ceilings", g.name,
                            g.points.size());
  return chart;
}

} // namespace aisp
