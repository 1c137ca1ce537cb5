// The roofline as a self-contained SVG: no scripts, no external fonts or styles, so that it can be
// written as a file or embedded inline in the HTML report.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "core/results/roofline.hpp"

namespace aisp::roofline {

namespace {

constexpr std::size_t k_max_labelled_points = 18;


std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Log-log axes: decades in both directions, mapped onto the plot rectangle.
struct Axes {
  double x_lo, x_hi, y_lo, y_hi;  // data ranges (FLOP/byte, TFLOP/s), powers of ten
  double left, right, top, bottom;  // pixels
  double px(double x) const {
    return left + (std::log10(x) - std::log10(x_lo)) / (std::log10(x_hi) - std::log10(x_lo)) * (right - left);
  }
  double py(double y) const {
    return bottom - (std::log10(y) - std::log10(y_lo)) / (std::log10(y_hi) - std::log10(y_lo)) * (bottom - top);
  }
};

double decade_below(double v) { return std::pow(10.0, std::floor(std::log10(v))); }
double decade_above(double v) { return std::pow(10.0, std::ceil(std::log10(v))); }

std::string tick_label(double v) {
  if (v >= 1) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

}  // namespace

std::string render_svg(const Chart& chart, int width, int height) {
  // The data ranges: every positive intensity and every ridge point, one decade of margin each side.
  const Roof* dram = nullptr;
  double top_rate = 0;
  for (const auto& r : chart.roofs) {
    if (r.memory && !dram) dram = &r;
    if (!r.memory) top_rate = std::max(top_rate, r.value);
  }
  std::vector<double> xs;
  for (const auto& p : chart.points) {
    if (p.intensity > 0) xs.push_back(p.intensity);
  }
  for (const auto& m : chart.roofs) {
    if (!m.memory) continue;
    for (const auto& c : chart.roofs) {
      if (!c.memory) xs.push_back(c.value * 1e3 / m.value);  // TFLOP/s / (GB/s) * 1e3 = FLOP/byte
    }
  }
  const double x_lo = xs.empty() ? 0.01 : decade_below(*std::min_element(xs.begin(), xs.end())) / 10;
  const double x_hi = xs.empty() ? 1000 : decade_above(*std::max_element(xs.begin(), xs.end())) * 10;
  // Where a point without FLOPs is drawn: the left edge, at achieved bandwidth x that intensity.
  const auto point_y = [&](const Point& p) {
    return p.intensity > 0 ? p.tflop_per_s : p.gb_per_s * x_lo * 1e-3;
  };
  std::vector<double> ys;
  for (const auto& p : chart.points) {
    if (point_y(p) > 0) ys.push_back(point_y(p));
  }
  for (const auto& r : chart.roofs) ys.push_back(r.memory ? r.value * x_lo * 1e-3 : r.value);
  double y_lo = ys.empty() ? 0.001 : decade_below(*std::min_element(ys.begin(), ys.end()));
  double y_hi = ys.empty() ? 1000 : decade_above(*std::max_element(ys.begin(), ys.end()) * 1.5);
  if (y_hi <= y_lo) y_hi = y_lo * 10;
  const Axes ax{x_lo, x_hi, y_lo, y_hi, 80.0, width - 230.0, 50.0, height - 90.0};

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      width, height, ax.left, xml_escape(chart.title));
  // Grid and ticks, one per decade.
  for (double x = x_lo; x <= x_hi * 1.0001; x *= 10) {
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                     ax.px(x), ax.top, ax.bottom, ax.bottom + 16, tick_label(x));
  }
  for (double y = y_lo; y <= y_hi * 1.0001; y *= 10) {
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                     ax.left, ax.py(y), ax.right, ax.left - 6, ax.py(y) + 4, tick_label(y));
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
                   "stroke=\"#888\"/>\n",
                   ax.left, ax.top, ax.right - ax.left, ax.bottom - ax.top);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">arithmetic intensity (FLOP per "
                   "declared DRAM byte)</text>\n",
                   (ax.left + ax.right) / 2, ax.bottom + 36);
  s += fmt::format("<text transform=\"translate(22,{:.1f}) rotate(-90)\" text-anchor=\"middle\">"
                   "achieved TFLOP/s</text>\n",
                   (ax.top + ax.bottom) / 2);

  // Compute roofs close in rate (BF16 and FP16) would print their labels on top of each other: stack them.
  std::vector<std::pair<double, const Roof*>> compute_labels;
  for (const auto& r : chart.roofs) {
    if (!r.memory) compute_labels.emplace_back(ax.py(r.value) + 4, &r);
  }
  std::sort(compute_labels.begin(), compute_labels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < compute_labels.size(); ++i) {
    compute_labels[i].first = std::max(compute_labels[i].first, compute_labels[i - 1].first + 12);
  }
  const auto label_y = [&](const Roof& r) {
    for (const auto& [y, roof] : compute_labels) {
      if (roof == &r) return y;
    }
    return ax.py(r.value) + 4;
  };

  // Roofs: memory roofs rise until the highest compute roof, compute roofs start at their ridge with
  // the first (DRAM) memory roof.
  for (const auto& r : chart.roofs) {
    if (r.memory) {
      const double x_end = top_rate > 0 ? std::min(x_hi, top_rate * 1e3 / r.value) : x_hi;
      const double y0 = r.value * x_lo * 1e-3, y1 = r.value * x_end * 1e-3;
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#1f5fa8\" "
                       "stroke-width=\"2\"/>\n",
                       ax.px(x_lo), ax.py(y0), ax.px(x_end), ax.py(y1));
      // The label runs along the roof, a third of the way up, clear of the points at the left edge.
      const double lx = ax.px(x_lo) + (ax.px(x_end) - ax.px(x_lo)) / 3;
      const double ly = ax.py(y0) + (ax.py(y1) - ax.py(y0)) / 3;
      const double angle = std::atan2(ax.py(y1) - ax.py(y0), ax.px(x_end) - ax.px(x_lo)) * 180 / std::numbers::pi;
      s += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate({:.1f})\" y=\"-5\" fill=\"#1f5fa8\">{} "
                       "{:.0f} GB/s</text>\n",
                       lx, ly, angle, xml_escape(r.label), r.value);
    } else {
      const double x_start = dram ? std::max(x_lo, r.value * 1e3 / dram->value) : x_lo;
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#b35900\" "
                       "stroke-width=\"2\"/>\n",
                       ax.px(x_start), ax.py(r.value), ax.right, ax.py(r.value));
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#b35900\">{} {:.4g} TFLOP/s</text>\n",
                       ax.right + 4, label_y(r), xml_escape(r.label), r.value);
    }
  }

  // Points, labels stacked so that points at one intensity (a ladder of copies) stay readable.
  struct Placed {
    const Point* p;
    double x, y, label_y;
  };
  std::vector<Placed> placed;
  for (const auto& p : chart.points) {
    const double y = point_y(p);
    if (!(y > 0)) continue;
    placed.push_back({&p, ax.px(p.intensity > 0 ? p.intensity : x_lo), ax.py(y), 0});
  }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.y < b.y; });
  for (std::size_t i = 0; i < placed.size(); ++i) {
    placed[i].label_y = placed[i].y + 4;
    for (std::size_t j = 0; j < i; ++j) {
      if (std::fabs(placed[j].x - placed[i].x) < 150 && placed[i].label_y < placed[j].label_y + 13) {
        placed[i].label_y = placed[j].label_y + 13;
      }
    }
  }
  // Past a dozen and a half points (a ladder's sweep on one roofline) the stacked labels run off the plot
  // and over each other: the points then carry their labels as hover titles only.
  const bool label_points = placed.size() <= k_max_labelled_points;
  for (const auto& q : placed) {
    const auto& p = *q.p;
    const std::string color = p.verdict == "PASS" ? "#1a7f37" : p.verdict == "IMPLAUSIBLE" ? "#cf222e" : "#777";
    const std::string fill = p.intensity > 0 ? color : "white";
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\" stroke=\"{}\" "
                     "stroke-width=\"1.5\"><title>{}: {:.1f}% of {}</title></circle>\n",
                     q.x, q.y, fill, color, xml_escape(p.label), p.percent, xml_escape(p.ceiling));
    if (!label_points) continue;
    // Points in the right half (high intensity, near the compute roofs' own labels) are labelled on
    // their left, so that the labels stay inside the plot.
    const bool left_side = q.x > (ax.left + ax.right) / 2;
    const double lx = left_side ? q.x - 28 : q.x + 28;
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\"/>\n",
                     left_side ? q.x - 5 : q.x + 5, q.y, left_side ? lx + 2 : lx - 2, q.label_y - 4);
    // A white halo keeps a label legible where it crosses a roof or another point's leader line.
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{} paint-order=\"stroke\" stroke=\"white\" "
                     "stroke-width=\"3\">{} ({:.1f}% of {}{})</text>\n",
                     lx, q.label_y, left_side ? " text-anchor=\"end\"" : "", xml_escape(p.label), p.percent,
                     xml_escape(ceiling_label(p.ceiling)), p.verdict == "PASS" ? "" : ", " + p.verdict);
  }
  s += fmt::format("<text x=\"{0:.1f}\" y=\"{1}\" fill=\"#555\">Roofs: this GPU's measured ceilings (aisp hw "
                   "peaks). Hollow points declare no FLOPs: drawn at the left edge at achieved GB/s x that "
                   "intensity,</text>\n<text x=\"{0:.1f}\" y=\"{2}\" fill=\"#555\">so that their distance below "
                   "the memory roof is their fraction of it. Green: PASS; red: IMPLAUSIBLE.{3}</text>\n",
                   ax.left, height - 30, height - 14,
                   label_points ? "" : fmt::format(" {} points: hover one for its name.", placed.size()));
  s += "</svg>\n";
  return s;
}

}  // namespace aisp::roofline
