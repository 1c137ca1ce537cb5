#include "core/results/compare.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/results/text_table.hpp"

namespace aisp {

using ojson = nlohmann::ordered_json;

namespace {

const TargetResult* find_target(const RunResults& r, const std::string& name, const AxisValues& axes) {
  for (const auto& t : r.targets) {
    if (t.name == name && t.axes == axes)
      return &t;
  }
  return nullptr;
}

std::size_t points_of(const RunResults& r, const std::string& name) {
  return static_cast<std::size_t>(std::count_if(r.targets.begin(), r.targets.end(),
                                                [&](const TargetResult& t) { return t.name == name; }));
}

const TargetResult* only_point(const RunResults& r, const std::string& name) {
  for (const auto& t : r.targets) {
    if (t.name == name)
      return &t;
  }
  return nullptr;
}

const VariantResult* find_variant(const TargetResult* t, const std::string& name) {
  if (!t)
    return nullptr;
  for (const auto& v : t->variants) {
    if (v.name == name)
      return &v;
  }
  return nullptr;
}

std::string axes_text(const AxisValues& axes) {
  return format_axes(axes, " ");
}

} // namespace

CompareResult compare_runs(const LoadedRun& a, const LoadedRun& b,
                           const std::vector<std::string>& selectors) {
  CompareResult c;
  c.run_a = a.results.run_id;
  c.run_b = b.results.run_id;
  if (a.results.hardware_key != b.results.hardware_key) {
    c.warnings.push_back(fmt::format("the runs are on different hardware: A {}, B {}",
                                     a.results.hardware_key, b.results.hardware_key));
  }
  // A target measured at one point by each run, at different axes: compared anyway (with a warning),
  // as before sweeps existed. Otherwise points match only at equal axes.
  const auto paired_b = [&](const TargetResult& tb) -> AxisValues {
    if (points_of(a.results, tb.name) == 1 && points_of(b.results, tb.name) == 1)
      return only_point(a.results, tb.name)->axes;
    return tb.axes;
  };
  for (const auto* run : {&a.results, &b.results}) {
    for (const auto& t : run->targets) {
      if (points_of(*run, t.name) > 1)
        c.has_sweeps = true;
    }
  }
  // Targets and variants in A's order, then those only B has.
  struct Key {
    std::string target;
    AxisValues axes;
    std::string variant;
    bool operator==(const Key&) const = default;
  };
  std::vector<Key> names;
  for (const auto* run : {&a.results, &b.results}) {
    for (const auto& t : run->targets) {
      const AxisValues axes = run == &a.results ? t.axes : paired_b(t);
      for (const auto& v : t.variants) {
        if (!selector_matches(v.name, selectors))
          continue;
        const Key key{t.name, axes, v.name};
        if (std::find(names.begin(), names.end(), key) == names.end())
          names.push_back(key);
      }
    }
  }
  std::vector<std::pair<std::string, AxisValues>> warned;
  for (const auto& [target, axes, variant] : names) {
    const TargetResult* ta = find_target(a.results, target, axes);
    const TargetResult* tb = find_target(b.results, target, axes);
    if (!tb && points_of(a.results, target) == 1 && points_of(b.results, target) == 1)
      tb = only_point(b.results, target);
    const std::pair<std::string, AxisValues> point{target, axes};
    if (ta && tb && std::find(warned.begin(), warned.end(), point) == warned.end()) {
      warned.push_back(point);
      const std::string where = c.has_sweeps && !axes.empty() ? target + " " + axes_text(axes) : target;
      if (ta->mode != tb->mode) {
        c.warnings.push_back(fmt::format("{}: A is in {} mode, B in {} mode", where,
                                         to_string(ta->mode), to_string(tb->mode)));
      }
      if (ta->axes != tb->axes) {
        c.warnings.push_back(fmt::format("{}: other axes (A {}, B {})", target, axes_text(ta->axes),
                                         axes_text(tb->axes)));
      }
    }
    CompareRow row;
    row.target = target;
    row.axes = axes;
    row.variant = variant;
    const VariantResult* va = find_variant(ta, variant);
    const VariantResult* vb = find_variant(tb, variant);
    if (va)
      row.verdict_a = va->verdict;
    if (vb)
      row.verdict_b = vb->verdict;
    if (va && va->stats)
      row.median_a_ms = va->stats->median;
    if (vb && vb->stats)
      row.median_b_ms = vb->stats->median;
    if (!va || !vb) {
      row.finding = !va ? "only in B" : "only in A";
    } else if (va->samples_ms.empty() || vb->samples_ms.empty()) {
      row.finding = "not compared: no samples in " +
                    std::string(va->samples_ms.empty() && vb->samples_ms.empty() ? "either run"
                                : va->samples_ms.empty()                         ? "A"
                                                                                 : "B");
    } else {
      row.speedup = stats::ratio_of_medians(va->samples_ms, vb->samples_ms);
      const auto& iv = row.speedup->interval;
      if (!iv.valid) {
        row.finding = "too few samples for an interval";
      } else if (iv.low > 1.0) {
        row.finding = "B faster";
      } else if (iv.high < 1.0) {
        row.finding = "B slower";
      } else {
        row.finding = "no significant difference";
      }
      if (va->verdict != Verdict::pass || vb->verdict != Verdict::pass)
        row.finding += " (not both PASS)";
    }
    c.rows.push_back(std::move(row));
  }
  return c;
}

std::string render_compare(const CompareResult& c, OutputFormat f) {
  const auto verdict = [](const std::optional<Verdict>& v) {
    return v ? std::string(to_string(*v)) : "-";
  };
  if (f == OutputFormat::json) {
    ojson rows = ojson::array();
    for (const auto& r : c.rows) {
      ojson speedup = nullptr;
      if (r.speedup) {
        speedup = ojson{{"value", r.speedup->ratio},
                        {"low", r.speedup->interval.low},
                        {"high", r.speedup->interval.high},
                        {"level", r.speedup->interval.level},
                        {"valid", r.speedup->interval.valid}};
      }
      rows.push_back(
          ojson{{"target", r.target},
                {"axes", r.axes},
                {"variant", r.variant},
                {"verdict_a", r.verdict_a ? ojson(to_string(*r.verdict_a)) : ojson(nullptr)},
                {"verdict_b", r.verdict_b ? ojson(to_string(*r.verdict_b)) : ojson(nullptr)},
                {"median_a_ms", r.median_a_ms ? ojson(*r.median_a_ms) : ojson(nullptr)},
                {"median_b_ms", r.median_b_ms ? ojson(*r.median_b_ms) : ojson(nullptr)},
                {"speedup_b_over_a", speedup},
                {"finding", r.finding}});
    }
    return ojson{{"schema", "aisp.compare"}, {"schema_version", 1},    {"run_a", c.run_a},
                 {"run_b", c.run_b},         {"warnings", c.warnings}, {"rows", rows}}
               .dump(2) +
           "\n";
  }
  TextTable t{
      {"variant", "median A", "median B", "speedup B vs A [95% CI]", "verdict A -> B", "finding"},
      {}};
  for (const auto& r : c.rows) {
    const std::string verdicts = r.verdict_a == r.verdict_b
                                     ? verdict(r.verdict_a)
                                     : verdict(r.verdict_a) + " -> " + verdict(r.verdict_b);
    // With sweeps, one variant has a row per point: the point's axes tell them apart.
    const std::string name = c.has_sweeps && !r.axes.empty() ? r.variant + " [" + axes_text(r.axes) + "]" : r.variant;
    t.rows.push_back({name, r.median_a_ms ? format_duration_ms(*r.median_a_ms) : "-",
                      r.median_b_ms ? format_duration_ms(*r.median_b_ms) : "-",
                      r.speedup ? fmt::format("{:.3f}x [{:.3f}, {:.3f}]", r.speedup->ratio,
                                              r.speedup->interval.low, r.speedup->interval.high)
                                : "-",
                      verdicts, r.finding});
  }
  std::string out;
  if (f != OutputFormat::csv) {
    out += fmt::format("A = {}, B = {}\n", c.run_a, c.run_b);
    for (const auto& w : c.warnings)
      out += "warning: " + w + "\n";
    out += f == OutputFormat::markdown ? "\n" : "";
  }
  return out + render_text_table(t, f);
}

} // namespace aisp
