#include "core/report/report_summary.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>

#include "core/base/error.hpp"
#include "core/results/expectations.hpp"
#include "core/results/expectations_check.hpp"

namespace aisp {

namespace {

void widen(std::optional<ValueRange>& r, double v) {
  if (!r)
    r = ValueRange{v, v};
  r->low = std::min(r->low, v);
  r->high = std::max(r->high, v);
}

// The fastest PASS non-vendor variant of one point; nullptr when none passed.
const VariantResult* fastest_step(const TargetResult& t) {
  const VariantResult* best = nullptr;
  for (const auto& v : t.variants) {
    if (v.verdict != Verdict::pass || !v.stats || v.kind == VariantKind::vendor)
      continue;
    if (!best || v.stats->median < best->stats->median)
      best = &v;
  }
  return best;
}

// > 0 when variant `a` is faster than `b` at more of the points where both passed, < 0 when `b`
// is, 0 on a draw.
int beats(const LadderGroup& g, const std::string& a, const std::string& b) {
  int score = 0;
  for (const auto* t : g.points) {
    const VariantResult *va = nullptr, *vb = nullptr;
    for (const auto& v : t->variants) {
      if (v.verdict != Verdict::pass || !v.stats)
        continue;
      if (v.name == a)
        va = &v;
      if (v.name == b)
        vb = &v;
    }
    if (va && vb && va->stats->median != vb->stats->median)
      score += va->stats->median < vb->stats->median ? 1 : -1;
  }
  return score;
}

// The expectations column of one ladder: what `bench check` would say about it, counted.
void check_expectations(LadderSummary& row, const LoadedRun& run, const LadderGroup& group,
                        const std::string& chapters_dir) {
  const std::string& hw = run.results.hardware_key;
  std::optional<std::vector<Expectations>> file;
  std::string path;
  try {
    path = expectations_path(chapters_dir, group.name, hw);
    file = read_expectations(path);
  } catch (const UsageError& e) { // no folder of this ladder in chapters_dir
    row.expectations = "no ladder folder";
    row.expectations_detail = e.what();
    return;
  } catch (const DataError& e) {
    row.expectations = "unreadable expectations";
    row.expectations_detail = e.what();
    row.expectations_bad = true;
    return;
  }
  if (!file) {
    row.expectations = "no expectations for " + hw;
    return;
  }
  LoadedRun one = run;
  one.results.targets.clear();
  for (const auto* t : group.points)
    one.results.targets.push_back(*t);
  const CheckReport report = check_run(one, chapters_dir, {group.name}, k_default_check_threshold);
  std::vector<std::string> parts;
  const auto add = [&](CheckVerdict v, const char* what) {
    if (const auto n = report.count(v))
      parts.push_back(fmt::format("{} {}", n, what));
  };
  add(CheckVerdict::regressed, "regressed");
  add(CheckVerdict::improved, "faster");
  add(CheckVerdict::machine_drift, "vendor drifted");
  add(CheckVerdict::inconclusive, "inconclusive");
  row.expectations_bad = report.count(CheckVerdict::regressed) > 0 ||
                         report.count(CheckVerdict::machine_drift) > 0;
  const std::size_t compared = report.rows.size() - report.count(CheckVerdict::not_comparable);
  if (parts.empty())
    row.expectations = compared > 0 ? "ok" : "not comparable";
  else
    row.expectations = fmt::format("{}", fmt::join(parts, ", "));
  // The hover text: how many were compared, and the first reason of each kind of not comparable.
  std::vector<std::string> reasons;
  for (const auto& r : report.rows) {
    if (r.verdict == CheckVerdict::not_comparable &&
        std::find(reasons.begin(), reasons.end(), r.reason) == reasons.end() && reasons.size() < 3)
      reasons.push_back(r.reason);
  }
  row.expectations_detail = fmt::format(
      "{} of {} variant runs compared with {} (threshold {:.0f}%){}{}", compared, report.rows.size(),
      std::filesystem::path(path).filename().string(), k_default_check_threshold * 100,
      reasons.empty() ? "" : "; not comparable: ", fmt::join(reasons, "; "));
}

} // namespace

std::vector<LadderGroup> group_ladders(const RunResults& run) {
  std::vector<LadderGroup> groups;
  for (const auto& t : run.targets) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const LadderGroup& g) { return g.name == t.name; });
    if (it == groups.end()) {
      groups.push_back({t.name, {}, {}});
      it = groups.end() - 1;
    }
    it->points.push_back(&t);
  }
  for (auto& g : groups) {
    // An axis every point has, at more than one value, is swept. One that only some points have (an
    // omit_at_default axis at its default, or points of runs from before the axis was added) is partial.
    AxisValues seen;  // every axis of the group, with a value of it
    for (const auto* p : g.points)
      seen.insert(p->axes.begin(), p->axes.end());
    for (const auto& [k, v] : seen) {
      bool everywhere = true, differs = false;
      for (const auto* p : g.points) {
        const auto f = p->axes.find(k);
        everywhere = everywhere && f != p->axes.end();
        differs = differs || (f != p->axes.end() && f->second != v);
      }
      if (!everywhere)
        g.partial_axes.push_back(k);
      else if (differs)
        g.swept_axes.push_back(k);
    }
  }
  return groups;
}

std::string report_anchor(const std::string& title) {
  std::string out = "t-";
  for (char c : title)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

std::string variant_stem(const std::string& variant, const std::string& target) {
  return variant.rfind(target + ":", 0) == 0 ? variant.substr(target.size() + 1) : variant;
}

std::string verdict_counts(const std::vector<const TargetResult*>& points) {
  std::vector<std::string> parts;
  for (Verdict v : {Verdict::pass, Verdict::fail, Verdict::invalid, Verdict::implausible,
                    Verdict::noisy, Verdict::skipped, Verdict::error}) {
    std::size_t n = 0;
    for (const auto* t : points) {
      n += static_cast<std::size_t>(std::count_if(t->variants.begin(), t->variants.end(),
                                                  [&](const VariantResult& r) { return r.verdict == v; }));
    }
    if (n > 0)
      parts.push_back(fmt::format("{} {}", n, to_string(v)));
  }
  return parts.empty() ? "no variants" : fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<LadderSummary> summarize_ladders(const LoadedRun& run, const ReportOptions& options) {
  std::vector<LadderSummary> rows;
  for (const auto& g : group_ladders(run.results)) {
    LadderSummary row;
    row.ladder = g.name;
    row.points = g.points.size();
    // Votes per variant: at how many points it is the fastest step. A tie goes to the one faster
    // at more of the points both passed, then to the later step, the one the ladder built towards.
    std::vector<std::string> order;
    std::map<std::string, std::size_t> wins;
    for (const auto* t : g.points) {
      for (const auto& v : t->variants) {
        if (std::find(order.begin(), order.end(), v.name) == order.end())
          order.push_back(v.name);
      }
      if (const auto* best = fastest_step(*t))
        ++wins[best->name];
    }
    std::size_t most = 0;
    for (const auto& [name, n] : wins)
      most = std::max(most, n);
    std::string best;
    for (const auto& name : order) {
      const auto it = wins.find(name);
      if (it == wins.end() || it->second != most)
        continue;
      if (best.empty() || beats(g, name, best) >= 0)
        best = name;
    }
    if (!best.empty()) {
      row.best = variant_stem(best, g.name);
      row.best_points = wins[best];
      for (const auto* t : g.points) {
        for (const auto& v : t->variants) {
          if (v.name != best || v.verdict != Verdict::pass || !v.stats)
            continue;
          if (const auto pct = percent_of_ceiling(v))
            widen(row.percent_of_ceiling, *pct);
          if (v.fraction_of_vendor)
            widen(row.fraction_of_vendor, v.fraction_of_vendor->value);
          if (v.speedup_vs_baseline)
            widen(row.speedup_vs_baseline, v.speedup_vs_baseline->value);
        }
      }
    }
    row.verdicts = verdict_counts(g.points);
    row.all_pass = std::all_of(g.points.begin(), g.points.end(), [](const TargetResult* t) {
      return std::all_of(t->variants.begin(), t->variants.end(), [](const VariantResult& v) {
        return v.verdict == Verdict::pass || v.verdict == Verdict::skipped;
      });
    });
    if (!options.chapters_dir.empty())
      check_expectations(row, run, g, options.chapters_dir);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string format_range(const std::optional<ValueRange>& r, const char* unit, int decimals) {
  if (!r)
    return "-";
  const std::string low = fmt::format("{:.{}f}", r->low, decimals);
  const std::string high = fmt::format("{:.{}f}", r->high, decimals);
  return low == high ? low + unit : low + "\u2013" + high + unit;
}

LoadedRun merge_runs(std::vector<LoadedRun> runs, std::vector<std::string>* replaced) {
  if (runs.empty())
    throw UsageError("no run to report on");
  if (runs.size() == 1)
    return std::move(runs.front());
  std::set<std::string> keys;
  for (const auto& r : runs)
    keys.insert(r.results.hardware_key);
  if (keys.size() > 1) {
    std::vector<std::string> which;
    for (const auto& r : runs)
      which.push_back(fmt::format("{} ({})", r.results.run_id, r.results.hardware_key));
    throw UsageError(fmt::format("cannot merge runs of different hardware into one report: {}",
                                 fmt::join(which, ", ")));
  }
  LoadedRun merged;
  merged.dir = runs.front().dir;
  merged.provenance = runs.front().provenance;
  merged.results.hardware_key = runs.front().results.hardware_key;
  merged.results.schema_version = runs.front().results.schema_version;
  merged.manifest = nlohmann::json{{"merged_runs", nlohmann::json::array()}};
  std::vector<std::string> ids;
  for (auto& r : runs) {
    ids.push_back(r.results.run_id);
    merged.manifest["merged_runs"].push_back({{"run_id", r.results.run_id},
                                              {"created_utc", r.results.created_utc},
                                              {"dir", r.dir},
                                              {"manifest", r.manifest}});
    if (merged.results.created_utc.empty() || r.results.created_utc < merged.results.created_utc)
      merged.results.created_utc = r.results.created_utc;
    // The roofs: the first run that found its ceilings (one machine, so one set).
    if (r.results.ceilings && r.results.ceilings->problem.empty() &&
        (!merged.results.ceilings || !merged.results.ceilings->problem.empty()))
      merged.results.ceilings = r.results.ceilings;
    else if (!merged.results.ceilings && r.results.ceilings)
      merged.results.ceilings = r.results.ceilings;
    for (auto& t : r.results.targets) {
      auto& targets = merged.results.targets;
      const auto same = std::find_if(targets.begin(), targets.end(), [&](const TargetResult& x) {
        return x.name == t.name && x.mode == t.mode && x.axes == t.axes;
      });
      if (same != targets.end()) {
        if (replaced)
          replaced->push_back(fmt::format("{}{} from {}", t.name,
                                          t.axes.empty() ? "" : " " + format_axes(t.axes, " "),
                                          r.results.run_id));
        *same = std::move(t);
      } else {
        targets.push_back(std::move(t));
      }
    }
  }
  // A curriculum split over many invocations: name the first run and count the others (the facts list
  // them all), and put the ladders back in curriculum order.
  merged.results.run_id = ids.size() > 2 ? fmt::format("{} and {} other runs", ids.front(), ids.size() - 1)
                                         : fmt::format("{}", fmt::join(ids, " + "));
  std::stable_sort(merged.results.targets.begin(), merged.results.targets.end(),
                   [](const TargetResult& a, const TargetResult& b) { return a.name < b.name; });
  return merged;
}

} // namespace aisp
