#include "core/results/expectations.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/base/error.hpp"
#include "core/results/render.hpp"

namespace aisp {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// Six significant digits: finer than any interval the harness can claim, coarse enough to diff
// well.
double round6(double x) {
  return x == 0 ? 0.0 : std::stod(fmt::format("{:.6g}", x));
}

ojson provenance_json(const ExpectationProvenance& p) {
  return ojson{{"run_id", p.run_id},   {"date", p.date},
               {"git_sha", p.git_sha}, {"git_dirty", p.git_dirty},
               {"device", p.device},   {"driver", p.driver},
               {"runtime", p.runtime}, {"clocks_policy", p.clocks_policy},
               {"mode", p.mode}};
}

ExpectationProvenance provenance_from(const json& j) {
  ExpectationProvenance p;
  p.run_id = j.at("run_id").get<std::string>();
  p.date = j.at("date").get<std::string>();
  p.git_sha = j.at("git_sha").get<std::string>();
  p.git_dirty = j.at("git_dirty").get<std::string>();
  p.device = j.at("device").get<std::string>();
  p.driver = j.at("driver").get<int>();
  p.runtime = j.at("runtime").get<int>();
  p.clocks_policy = j.at("clocks_policy").get<std::string>();
  p.mode = j.at("mode").get<std::string>();
  return p;
}

ojson ratio_json(const std::optional<SpeedupExpectation>& r) {
  if (!r)
    return nullptr;
  return ojson{{"value", round6(r->value)}, {"low", round6(r->low)}, {"high", round6(r->high)}};
}

std::optional<SpeedupExpectation> ratio_from(const json& j) {
  if (j.is_null())
    return std::nullopt;
  return SpeedupExpectation{j.at("value").get<double>(), j.at("low").get<double>(),
                            j.at("high").get<double>()};
}

ojson variant_json(const VariantExpectation& v) {
  ojson out{
      {"name", v.name},
      {"kind", v.kind},
      {"median_ms", round6(v.median_ms)},
      {"median_ci_ms", ojson{{"low", round6(v.ci_low_ms)}, {"high", round6(v.ci_high_ms)}}},
      {"samples", v.samples},
      {"gb_per_s", round6(v.gb_per_s)},
      {"tflop_per_s", round6(v.tflop_per_s)},
      {"percent_of_ceiling",
       v.percent_of_ceiling ? ojson(round6(*v.percent_of_ceiling)) : ojson(nullptr)},
      {"ceiling", v.ceiling},
      {"speedup_vs_baseline", ratio_json(v.speedup_vs_baseline)},
      {"fraction_of_vendor", ratio_json(v.fraction_of_vendor)},
      {"provenance", provenance_json(v.provenance)}};
  if (!v.facts.empty()) {  // only when there are some: files of ladders without facts stay as they were
    ojson facts = ojson::object();
    for (const auto& [k, val] : v.facts)
      facts[k] = val;
    out["facts"] = facts;
  }
  if (v.throttled)  // only when it did: unthrottled entries stay as they were
    out["throttled"] = ojson{{"reasons", v.throttle_reasons}};
  return out;
}

VariantExpectation variant_from(const json& j) {
  VariantExpectation v;
  v.name = j.at("name").get<std::string>();
  v.kind = j.at("kind").get<std::string>();
  v.median_ms = j.at("median_ms").get<double>();
  v.ci_low_ms = j.at("median_ci_ms").at("low").get<double>();
  v.ci_high_ms = j.at("median_ci_ms").at("high").get<double>();
  v.samples = j.at("samples").get<std::size_t>();
  v.gb_per_s = j.at("gb_per_s").get<double>();
  v.tflop_per_s = j.at("tflop_per_s").get<double>();
  if (!j.at("percent_of_ceiling").is_null())
    v.percent_of_ceiling = j.at("percent_of_ceiling").get<double>();
  v.ceiling = j.at("ceiling").get<std::string>();
  v.speedup_vs_baseline = ratio_from(j.at("speedup_vs_baseline"));
  // Optional: files written before it existed lack the key and still load.
  if (j.contains("fraction_of_vendor"))
    v.fraction_of_vendor = ratio_from(j.at("fraction_of_vendor"));
  v.provenance = provenance_from(j.at("provenance"));
  if (j.contains("facts")) {  // optional, like fraction_of_vendor
    for (const auto& [k, val] : j.at("facts").items())
      v.facts.emplace_back(k, val.is_string() ? val.get<std::string>() : val.dump());
    std::sort(v.facts.begin(), v.facts.end());
  }
  if (j.contains("throttled")) {  // optional, like facts
    v.throttled = true;
    v.throttle_reasons = j.at("throttled").at("reasons").get<std::vector<std::string>>();
  }
  if (!(v.median_ms > 0))
    throw DataError("variant " + v.name + " has a median that is not positive");
  return v;
}

// Sort order of a file's configurations.
bool configuration_before(const Expectations& a, const Expectations& b) {
  return std::tie(a.mode, a.clock, a.axes) < std::tie(b.mode, b.clock, b.axes);
}

ojson configuration_json(const Expectations& e) {
  std::vector<const VariantExpectation*> sorted;
  for (const auto& v : e.variants)
    sorted.push_back(&v);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  ojson variants = ojson::array();
  for (const auto* v : sorted)
    variants.push_back(variant_json(*v));
  ojson axes = ojson::object();
  for (const auto& [k, v] : e.axes)
    axes[k] = v;
  // In the file the flush is its own field beside "mode" (absent: a file from before it was recorded).
  const bool write_flush = e.mode == k_cold_write_flush_mode;
  ojson out{{"mode", write_flush ? std::string("cold") : e.mode}};
  if (write_flush || e.mode == "cold") out["l2_flush"] = write_flush ? "write" : "read";
  out.update(ojson{{"clock", e.clock}, {"axes", axes}, {"variants", variants}});
  return out;
}

// A configuration's fields from `j` (a v2 configuration, or a whole v1 file).
Expectations configuration_from(const json& j, const std::string& target, const std::string& hw, int version) {
  Expectations e;
  e.schema_version = version;
  e.target = target;
  e.hardware_key = hw;
  e.mode = j.at("mode").get<std::string>();
  if (e.mode == "cold") {
    const std::string flush = j.value("l2_flush", std::string("write"));  // absent: stored before 2026-11-25
    if (flush != "read" && flush != "write")
      throw DataError(fmt::format("configuration with an unknown l2_flush '{}'", flush));
    if (flush == "write") e.mode = k_cold_write_flush_mode;
  }
  e.clock = j.at("clock").get<std::string>();
  for (const auto& [k, v] : j.at("axes").items())
    e.axes[k] = v.get<std::int64_t>();
  for (const auto& v : j.at("variants"))
    e.variants.push_back(variant_from(v));
  return e;
}

} // namespace

std::string configuration_mode(const TargetResult& t) {
  if (t.mode == CacheMode::hot) return "hot";
  return t.l2_flush == L2Flush::read ? "cold" : k_cold_write_flush_mode;
}

std::string configuration_text(const std::string& mode, const std::string& clock, const AxisValues& axes) {
  std::string out = fmt::format("mode {}, {} clock", mode, clock);
  for (const auto& [k, v] : axes)
    out += fmt::format(", {}={}", k, v);
  return out;
}

const Expectations* find_configuration(const std::vector<Expectations>& configurations, const std::string& mode,
                                       const std::string& clock, const AxisValues& axes) {
  for (const auto& e : configurations) {
    if (e.mode == mode && e.clock == clock && e.axes == axes)
      return &e;
  }
  return nullptr;
}

const VariantExpectation* Expectations::find(const std::string& variant) const {
  for (const auto& v : variants) {
    if (v.name == variant)
      return &v;
  }
  return nullptr;
}

std::string expectations_to_text(const std::vector<Expectations>& configurations) {
  if (configurations.empty())
    throw std::invalid_argument("expectations_to_text: no configuration");
  std::vector<const Expectations*> sorted;
  for (const auto& e : configurations) {
    if (e.target != configurations.front().target || e.hardware_key != configurations.front().hardware_key)
      throw std::invalid_argument("expectations_to_text: configurations of different targets or hardware");
    sorted.push_back(&e);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return configuration_before(*a, *b); });
  ojson list = ojson::array();
  for (const auto* e : sorted)
    list.push_back(configuration_json(*e));
  const ojson doc{{"schema", k_expectations_schema_name},
                  {"schema_version", k_expectations_schema_version},
                  {"generated_by", "aisp bench run --update-expectations (do not edit by hand)"},
                  {"target", configurations.front().target},
                  {"hardware_key", configurations.front().hardware_key},
                  {"configurations", list}};
  return doc.dump(2) + "\n";
}

std::string expectations_to_text(const Expectations& e) {
  return expectations_to_text(std::vector<Expectations>{e});
}

std::vector<Expectations> expectations_from_text(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw DataError(
        fmt::format("expectations file {} is not valid JSON ({}); it was left as it is: fix or "
                    "delete it",
                    origin, e.what()));
  }
  if (!j.is_object() || j.value("schema", "") != k_expectations_schema_name) {
    throw DataError(
        fmt::format("{} is not an aisp expectations file (missing \"schema\": \"{}\"); it was "
                    "left as it is",
                    origin, k_expectations_schema_name));
  }
  try {
    const int version = j.at("schema_version").get<int>();
    if (version > k_expectations_schema_version) {
      throw DataError(fmt::format(
          "expectations file {} has schema version {}, newer than this aisp reads ({}); "
          "it was left as it is: use a newer aisp",
          origin, version, k_expectations_schema_version));
    }
    if (version < 1)
      throw DataError(fmt::format("expectations file {}: bad schema version", origin));
    const std::string target = j.at("target").get<std::string>();
    const std::string hw = j.at("hardware_key").get<std::string>();
    std::vector<Expectations> out;
    if (version == 1) {
      out.push_back(configuration_from(j, target, hw, version));  // v1: one configuration, at the top
    } else {
      for (const auto& c : j.at("configurations"))
        out.push_back(configuration_from(c, target, hw, version));
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (std::size_t k = 0; k < i; ++k) {
        if (out[k].mode == out[i].mode && out[k].clock == out[i].clock && out[k].axes == out[i].axes) {
          throw DataError(fmt::format("expectations file {} holds the configuration ({}) twice; it was left as it is",
                                      origin, configuration_text(out[i].mode, out[i].clock, out[i].axes)));
        }
      }
    }
    return out;
  } catch (const json::exception& ex) {
    throw DataError(fmt::format(
        "expectations file {} is malformed ({}); it was left as it is: fix or delete it", origin,
        ex.what()));
  } catch (const DataError& ex) {
    const std::string what = ex.what();
    if (what.find(origin) != std::string::npos)
      throw;
    throw DataError(
        fmt::format("expectations file {} is malformed ({}); it was left as it is", origin, what));
  }
}

std::string ladder_folder(const std::string& chapters_dir, const std::string& target) {
  const auto colon = target.find(':');
  if (colon == std::string::npos || target.find(':', colon + 1) != std::string::npos) {
    throw UsageError(fmt::format("'{}' is not a target name (chNN:ladder)", target));
  }
  const std::string chapter = target.substr(0, colon);
  const std::string ladder = target.substr(colon + 1);
  std::error_code ec;
  if (!fs::is_directory(chapters_dir, ec)) {
    throw UsageError(
        fmt::format("chapters folder {} does not exist (see --chapters-dir)", chapters_dir));
  }
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(chapters_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != chapter && name.rfind(chapter + "_", 0) != 0)
      continue;
    if (fs::is_directory(entry.path() / ladder, ec))
      found.push_back((entry.path() / ladder).string());
  }
  if (found.empty()) {
    throw UsageError(fmt::format("no ladder folder {}/{}_*/{}/ for target {}", chapters_dir,
                                 chapter, ladder, target));
  }
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    throw UsageError(
        fmt::format("target {} matches more than one folder: {}", target, fmt::join(found, ", ")));
  }
  return found.front();
}

std::string expectations_path(const std::string& chapters_dir, const std::string& target,
                              const std::string& hardware_key) {
  return (fs::path(ladder_folder(chapters_dir, target)) /
          ("expectations_" + hardware_key + ".json"))
      .string();
}

std::optional<std::vector<Expectations>> read_expectations(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return std::nullopt;
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const std::runtime_error& e) {
    throw DataError(e.what());
  }
  return expectations_from_text(text, path);
}

std::vector<Expectations> read_all_expectations(const std::string& folder) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("expectations_", 0) == 0 && name.size() > 5 &&
        name.substr(name.size() - 5) == ".json") {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Expectations> out;
  for (const auto& p : paths) {
    // Held in a named variable: a range-for over *temporary would iterate a destroyed optional.
    auto file = read_expectations(p);
    for (auto& e : *file)
      out.push_back(std::move(e));
  }
  return out;
}

VariantExpectation expectation_of(const LoadedRun& run, const TargetResult& t,
                                  const VariantResult& v) {
  VariantExpectation e;
  e.name = v.name;
  e.kind = std::string(to_string(v.kind));
  if (v.stats) {
    e.median_ms = v.stats->median;
    e.ci_low_ms = v.stats->median_ci.low;
    e.ci_high_ms = v.stats->median_ci.high;
    e.samples = v.stats->n;
  }
  e.gb_per_s = v.gb_per_s;
  e.tflop_per_s = v.tflop_per_s;
  e.percent_of_ceiling = percent_of_ceiling(v);
  if (e.percent_of_ceiling)
    e.ceiling = v.roofline->ceiling;
  if (v.speedup_vs_baseline) {
    e.speedup_vs_baseline = SpeedupExpectation{
        v.speedup_vs_baseline->value, v.speedup_vs_baseline->low, v.speedup_vs_baseline->high};
  }
  if (v.fraction_of_vendor) {
    e.fraction_of_vendor = SpeedupExpectation{
        v.fraction_of_vendor->value, v.fraction_of_vendor->low, v.fraction_of_vendor->high};
  }
  e.facts = v.facts;
  std::sort(e.facts.begin(), e.facts.end());
  if (v.telemetry && v.telemetry->throttled) {
    e.throttled = true;
    e.throttle_reasons = v.telemetry->throttle_reasons;
  }
  const auto& p = run.provenance;
  e.provenance = {p.run_id,          p.created_utc,   p.git_sha,
                  p.git_dirty,       p.device_name,   p.driver_version,
                  p.runtime_version, p.clocks_policy, std::string(to_string(t.mode))};
  return e;
}

std::vector<ExpectationUpdate> update_expectations(const LoadedRun& run,
                                                   const std::string& chapters_dir,
                                                   const std::vector<std::string>& selectors) {
  std::vector<ExpectationUpdate> updates;
  const std::string& hw = run.results.hardware_key;
  // One file per target: every axis point the run measured it at merges into the same file.
  std::vector<std::string> names;
  for (const auto& t : run.results.targets) {
    if (selector_matches(t.name, selectors) && std::find(names.begin(), names.end(), t.name) == names.end())
      names.push_back(t.name);
  }
  for (const auto& name : names) {
    ExpectationUpdate u;
    u.target = name;
    std::optional<std::vector<Expectations>> stored;
    try {
      u.path = expectations_path(chapters_dir, name, hw);
      stored = read_expectations(u.path);
    } catch (const std::exception& e) { // UsageError (no folder) or DataError (untrusted file)
      u.error = e.what();
      updates.push_back(std::move(u));
      continue;
    }
    std::vector<Expectations> file = stored.value_or(std::vector<Expectations>{});
    if (!file.empty() && (file.front().target != name || file.front().hardware_key != hw)) {
      u.error =
          fmt::format("{} holds expectations for {} on {}, not {} on {}; it was left as it is",
                      u.path, file.front().target, file.front().hardware_key, name, hw);
      updates.push_back(std::move(u));
      continue;
    }
    std::size_t points = 0;
    for (const auto& t : run.results.targets)
      points += t.name == name;
    // Configurations stored before one of the target's key axes existed can never be measured again:
    // a run that records its key axes drops them (runs written before key_axes prune nothing).
    std::vector<std::string> key_axes;
    for (const auto& t : run.results.targets) {
      if (t.name == name && !t.key_axes.empty())
        key_axes = t.key_axes;
    }
    std::vector<std::string> dropped;
    std::erase_if(file, [&](const Expectations& e) {
      for (const auto& axis : key_axes) {
        if (e.axes.count(axis))
          continue;
        dropped.push_back(fmt::format("dropped {}: stored before axis '{}' existed",
                                      configuration_text(e.mode, e.clock, e.axes), axis));
        return true;
      }
      return false;
    });
    u.notes = dropped;
    int changed = 0;
    for (const auto& t : run.results.targets) {
      if (t.name != name)
        continue;
      const std::string mode = configuration_mode(t), clock(to_string(t.clock));
      // With several points, each note names its point.
      const std::string at = points > 1 ? " [" + format_axes(t.axes) + "]" : "";
      auto it = std::find_if(file.begin(), file.end(), [&](const Expectations& e) {
        return e.mode == mode && e.clock == clock && e.axes == t.axes;
      });
      Expectations fresh_config;
      fresh_config.target = name;
      fresh_config.hardware_key = hw;
      fresh_config.mode = mode;
      fresh_config.clock = clock;
      fresh_config.axes = t.axes;
      Expectations& e = it != file.end() ? *it : fresh_config;
      int changed_here = 0;
      for (const auto& v : t.variants) {
        if (!selector_matches(v.name, selectors))
          continue;
        const auto old = std::find_if(e.variants.begin(), e.variants.end(),
                                      [&](const VariantExpectation& x) { return x.name == v.name; });
        const bool had = old != e.variants.end();
        if (v.verdict != Verdict::pass || !v.stats) {
          u.notes.push_back(fmt::format("{}{}: not updated ({}{}){}", v.name, at, to_string(v.verdict),
                                        v.reason.empty() ? "" : ": " + v.reason,
                                        had ? "; the stored expectation is kept" : ""));
          continue;
        }
        VariantExpectation fresh = expectation_of(run, t, v);
        u.notes.push_back(fmt::format(
            "{}{}: {}{}", v.name, at, format_duration_ms(fresh.median_ms),
            had ? fmt::format(" (was {})", format_duration_ms(old->median_ms)) : " (new)"));
        if (had) {
          *old = std::move(fresh);
        } else {
          e.variants.push_back(std::move(fresh));
        }
        ++changed_here;
      }
      if (changed_here > 0 && it == file.end()) {
        // A configuration measured with the other L2 flush is superseded, not kept beside: its numbers
        // are not comparable, and a README table must not mix the two.
        const auto superseded = std::find_if(file.begin(), file.end(), [&](const Expectations& e) {
          return e.mode != mode && e.mode.starts_with("cold") && mode.starts_with("cold") && e.clock == clock &&
                 e.axes == t.axes;
        });
        if (superseded != file.end()) {
          u.notes.push_back(fmt::format("replaced the configuration ({}) and its {} variants: measured with the "
                                        "other L2 flush",
                                        configuration_text(superseded->mode, clock, t.axes),
                                        superseded->variants.size()));
          file.erase(superseded);
        }
        if (!file.empty()) {
          u.notes.push_back(fmt::format("added the configuration ({}) beside the {} stored",
                                        configuration_text(mode, clock, t.axes), file.size()));
        }
        file.push_back(std::move(fresh_config));
      }
      changed += changed_here;
    }
    if (changed == 0) {
      // Nothing is written, so nothing was dropped either: the file keeps them until an update writes it.
      u.notes.erase(u.notes.begin(), u.notes.begin() + static_cast<std::ptrdiff_t>(dropped.size()));
      u.notes.push_back(dropped.empty() ? "no variant passed: nothing written"
                                        : fmt::format("no variant passed: nothing written, and nothing dropped "
                                                      "({} configuration(s) stored before an axis existed)",
                                                      dropped.size()));
      updates.push_back(std::move(u));
      continue;
    }
    try {
      write_file_atomically(u.path, expectations_to_text(file));
      u.written = true;
    } catch (const std::exception& ex) {
      u.error = ex.what();
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

} // namespace aisp
