#include "core/results/results.hpp"

#include <algorithm>
#include <limits>
#include <fmt/format.h>

#include "core/base/error.hpp"

namespace aisp {

using ojson = nlohmann::ordered_json;

namespace {

// JSON has no NaN or infinity: nlohmann writes them as null. A null number reads back as NaN, so that a
// non-finite measurement survives the trip instead of making the whole document unreadable.
double number_at(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  return v.get<double>();
}


ojson interval_json(const stats::Interval& i) {
  return ojson{{"low", i.low}, {"high", i.high}, {"level", i.level}, {"valid", i.valid}};
}

stats::Interval interval_from(const nlohmann::json& j) {
  return {number_at(j, "low"), number_at(j, "high"), number_at(j, "level"),
          j.at("valid").get<bool>()};
}

ojson summary_json(const stats::Summary& s) {
  return ojson{{"n", s.n},          {"median", s.median}, {"mean", s.mean},
               {"stdev", s.stdev},  {"cv", s.cv},         {"min", s.min},
               {"max", s.max},      {"p05", s.p05},       {"p95", s.p95},
               {"median_ci", interval_json(s.median_ci)},
               {"rel_ci_half_width", s.rel_ci_half_width}};
}

stats::Summary summary_from(const nlohmann::json& j) {
  stats::Summary s;
  s.n = j.at("n").get<std::size_t>();
  s.median = number_at(j, "median");
  s.mean = number_at(j, "mean");
  s.stdev = number_at(j, "stdev");
  s.cv = number_at(j, "cv");
  s.min = number_at(j, "min");
  s.max = number_at(j, "max");
  s.p05 = number_at(j, "p05");
  s.p95 = number_at(j, "p95");
  s.median_ci = interval_from(j.at("median_ci"));
  s.rel_ci_half_width = number_at(j, "rel_ci_half_width");
  return s;
}

ojson comparison_json(const Comparison& c) {
  return ojson{{"against", c.against}, {"value", c.value},      {"low", c.low},
               {"high", c.high},       {"significant", c.significant}};
}

Comparison comparison_from(const nlohmann::json& j) {
  return {j.at("against").get<std::string>(), number_at(j, "value"), number_at(j, "low"),
          number_at(j, "high"), j.at("significant").get<bool>()};
}

ojson validation_json(const Validation& v) {
  ojson first = ojson::array();
  for (const auto& m : v.first_mismatches) {
    first.push_back(ojson{{"index", m.index}, {"got", m.got}, {"expected", m.expected}});
  }
  ojson out{{"passed", v.passed()},
               {"failed_check", v.failed_check},
               {"output", v.output_name},
               {"seeds", v.seeds},
               {"elements_checked", v.elements_checked},
               {"mismatches", v.mismatches},
               {"max_abs_error", v.max_abs_error},
               {"max_rel_error", v.max_rel_error},
               {"first_mismatches", first},
               {"timed_output_checked", v.timed_output_checked}};
  // Written only when set, so that files of runs before these checks existed round-trip unchanged.
  if (v.reference_masked) out["reference_masked"] = true;
  if (const auto& f = v.fresh_inputs) {
    out["fresh_inputs"] = ojson{{"seeds", f->seeds},       {"fresh_ms", f->fresh_ms},
                                {"seen_ms", f->seen_ms},   {"compared_with", f->compared_with},
                                {"ratio", f->ratio}};
  }
  return out;
}

Validation validation_from(const nlohmann::json& j) {
  Validation v;
  v.failed_check = j.at("failed_check").get<std::string>();
  v.output_name = j.at("output").get<std::string>();
  v.seeds = j.at("seeds").get<std::vector<std::uint64_t>>();
  v.elements_checked = j.at("elements_checked").get<std::uint64_t>();
  v.mismatches = j.at("mismatches").get<std::uint64_t>();
  v.max_abs_error = number_at(j, "max_abs_error");
  v.max_rel_error = number_at(j, "max_rel_error");
  for (const auto& m : j.at("first_mismatches")) {
    v.first_mismatches.push_back({m.at("index").get<std::uint64_t>(), number_at(m, "got"),
                                  number_at(m, "expected")});
  }
  v.timed_output_checked = j.at("timed_output_checked").get<bool>();
  // Both added after schema 1 was first written: absent in older files.
  v.reference_masked = j.value("reference_masked", false);
  if (j.contains("fresh_inputs")) {
    const auto& f = j.at("fresh_inputs");
    v.fresh_inputs = FreshInputsRecord{f.at("seeds").get<std::vector<std::uint64_t>>(), number_at(f, "fresh_ms"),
                                       number_at(f, "seen_ms"), f.at("compared_with").get<std::string>(),
                                       number_at(f, "ratio")};
  }
  return v;
}

ojson audit_json(const AuditRecord& a) {
  ojson out{{"method", a.method},         {"launches", a.launches}, {"host_launch_ms", a.host_launch_ms},
            {"event_ms", a.event_ms},     {"drain_ms", a.drain_ms}, {"findings", a.findings}};
  if (!a.points.empty()) out["points"] = a.points;  // only when known: older files round-trip unchanged
  return out;
}

AuditRecord audit_from(const nlohmann::json& j) {
  AuditRecord a;
  a.method = j.at("method").get<std::string>();
  a.launches = j.at("launches").get<int>();
  a.points = j.value("points", std::vector<std::string>{});  // absent in files written before it existed
  a.host_launch_ms = number_at(j, "host_launch_ms");
  a.event_ms = number_at(j, "event_ms");
  a.drain_ms = number_at(j, "drain_ms");
  a.findings = j.at("findings").get<std::vector<std::string>>();
  return a;
}

ojson telemetry_json(const TelemetryRecord& t) {
  return ojson{{"sm_clock_mhz_min", t.sm_clock_mhz_min}, {"sm_clock_mhz_max", t.sm_clock_mhz_max},
               {"power_w_max", t.power_w_max},           {"temperature_c_max", t.temperature_c_max},
               {"throttle_reasons", t.throttle_reasons}, {"throttled", t.throttled}};
}

TelemetryRecord telemetry_from(const nlohmann::json& j) {
  return {number_at(j, "sm_clock_mhz_min"), number_at(j, "sm_clock_mhz_max"),
          number_at(j, "power_w_max"), number_at(j, "temperature_c_max"),
          j.at("throttle_reasons").get<std::vector<std::string>>(), j.at("throttled").get<bool>()};
}

ojson profile_json(const VariantProfile& p) {
  ojson metrics = ojson::object();
  for (const auto& [k, v] : p.metrics) metrics[k] = v;
  return ojson{{"set", p.set},
               {"report", p.report},
               {"json", p.json},
               {"error", p.error},
               {"metrics", metrics},
               {"dram_bytes_ratio", p.dram_bytes_ratio ? ojson(*p.dram_bytes_ratio) : ojson(nullptr)},
               {"bytes_mismatch", p.bytes_mismatch}};
}

VariantProfile profile_from(const nlohmann::json& j) {
  VariantProfile p;
  p.set = j.at("set").get<std::string>();
  p.report = j.at("report").get<std::string>();
  p.json = j.at("json").get<std::string>();
  p.error = j.at("error").get<std::string>();
  for (const auto& [k, v] : j.at("metrics").items()) p.metrics[k] = v.get<double>();
  if (!j.at("dram_bytes_ratio").is_null()) p.dram_bytes_ratio = number_at(j, "dram_bytes_ratio");
  p.bytes_mismatch = j.at("bytes_mismatch").get<bool>();
  return p;
}

template <class T, class F>
std::optional<T> optional_from(const nlohmann::json& j, const char* key, F&& f) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return f(j.at(key));
}

template <class T, class F>
ojson optional_json(const std::optional<T>& o, F&& f) {
  return o ? f(*o) : ojson(nullptr);
}

VariantKind kind_from(const std::string& s) {
  for (VariantKind k : {VariantKind::baseline, VariantKind::step, VariantKind::optimized,
                        VariantKind::vendor}) {
    if (to_string(k) == s) return k;
  }
  throw DataError("unknown variant kind '" + s + "'");
}

}  // namespace

ojson to_json(const VariantResult& v) {
  ojson result{{"name", v.name},
               {"step", v.step},
               {"slug", v.slug},
               {"kind", to_string(v.kind)},
               {"summary", v.summary},
               {"precision", v.precision},
               {"verdict", to_string(v.verdict)},
               {"reason", v.reason},
               {"validation", optional_json(v.validation, validation_json)},
               {"batch", v.batch},
               {"samples_ms", v.samples_ms},
               {"stats_ms", optional_json(v.stats, summary_json)},
               {"gb_per_s", v.gb_per_s},
               {"tflop_per_s", v.tflop_per_s},
               {"speedup_vs_baseline", optional_json(v.speedup_vs_baseline, comparison_json)},
               {"fraction_of_vendor", optional_json(v.fraction_of_vendor, comparison_json)},
               {"notes", v.notes},
               {"audit", optional_json(v.audit, audit_json)},
               {"telemetry", optional_json(v.telemetry, telemetry_json)},
               {"roofline", optional_json(v.roofline, [](const RooflinePlacement& p) { return to_json(p); })}};
  // Absent from most runs: written only when present, so results without one keep their exact form.
  if (!v.facts.empty()) {
    // Keys sorted, so that a document reads back and rewrites byte for byte (readers see sorted keys).
    auto sorted = v.facts;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ojson facts = ojson::object();
    for (const auto& [k, val] : sorted) facts[k] = val;
    result["facts"] = facts;
  }
  if (v.profile) result["profile"] = profile_json(*v.profile);
  return result;
}

VariantResult variant_result_from_json(const nlohmann::json& j) {
  VariantResult v;
  v.name = j.at("name").get<std::string>();
  v.step = j.at("step").get<int>();
  v.slug = j.at("slug").get<std::string>();
  v.kind = kind_from(j.at("kind").get<std::string>());
  v.summary = j.at("summary").get<std::string>();
  v.precision = j.at("precision").get<std::string>();
  const auto verdict = verdict_from_string(j.at("verdict").get<std::string>());
  if (!verdict) throw DataError("unknown verdict '" + j.at("verdict").get<std::string>() + "'");
  v.verdict = *verdict;
  v.reason = j.at("reason").get<std::string>();
  v.validation = optional_from<Validation>(j, "validation", validation_from);
  v.batch = j.at("batch").get<int>();
  v.samples_ms = j.at("samples_ms").get<std::vector<double>>();
  v.stats = optional_from<stats::Summary>(j, "stats_ms", summary_from);
  v.gb_per_s = number_at(j, "gb_per_s");
  v.tflop_per_s = number_at(j, "tflop_per_s");
  v.speedup_vs_baseline = optional_from<Comparison>(j, "speedup_vs_baseline", comparison_from);
  v.fraction_of_vendor = optional_from<Comparison>(j, "fraction_of_vendor", comparison_from);
  v.notes = j.at("notes").get<std::vector<std::string>>();
  v.audit = optional_from<AuditRecord>(j, "audit", audit_from);
  v.telemetry = optional_from<TelemetryRecord>(j, "telemetry", telemetry_from);
  v.profile = optional_from<VariantProfile>(j, "profile", profile_from);
  v.roofline = optional_from<RooflinePlacement>(j, "roofline", placement_from_json);
  if (j.contains("facts") && !j.at("facts").is_null()) {
    for (const auto& [k, val] : j.at("facts").items()) {
      v.facts.emplace_back(k, val.is_string() ? val.get<std::string>() : val.dump());
    }
  }
  return v;
}

ojson to_json(const TargetResult& t) {
  ojson axes = ojson::object();
  for (const auto& [k, val] : t.axes) axes[k] = val;
  ojson variants = ojson::array();
  for (const auto& v : t.variants) variants.push_back(to_json(v));
  ojson out{{"name", t.name},
            {"summary", t.summary},
            {"clock", to_string(t.clock)},
            {"mode", to_string(t.mode)}};
  if (t.mode == CacheMode::cold) out["l2_flush"] = to_string(t.l2_flush);
  out["axes"] = axes;
  // Added after schema 1 was first written: written when known, so that older files round-trip unchanged.
  if (!t.key_axes.empty()) out["key_axes"] = t.key_axes;
  out.update(ojson{{"bytes_per_launch", t.bytes_per_launch},
                   {"flops_per_launch", t.flops_per_launch},
                   {"bytes_read_per_launch", t.bytes_read_per_launch},
                   {"bytes_written_per_launch", t.bytes_written_per_launch},
                   {"flop_dtype", t.flop_dtype},
                   {"memory_ceiling", t.memory_ceiling},
                   {"baseline", t.baseline},
                   {"vendor", t.vendor},
                   {"noise_floor_ms", t.noise_floor_ms},
                   {"variants", variants}});
  return out;
}

TargetResult target_result_from_json(const nlohmann::json& j) {
  TargetResult t;
  t.name = j.at("name").get<std::string>();
  t.summary = j.at("summary").get<std::string>();
  const auto clock = j.at("clock").get<std::string>();
  if (clock != "gpu" && clock != "wall") throw DataError("unknown clock '" + clock + "'");
  t.clock = clock == "gpu" ? ClockKind::gpu : ClockKind::wall;
  const auto mode = j.at("mode").get<std::string>();
  if (mode != "cold" && mode != "hot") throw DataError("unknown mode '" + mode + "'");
  t.mode = mode == "cold" ? CacheMode::cold : CacheMode::hot;
  // Runs written before "l2_flush" existed were all flushed by writing.
  const auto flush = j.value("l2_flush", std::string("write"));
  if (flush != "read" && flush != "write") throw DataError("unknown l2_flush '" + flush + "'");
  t.l2_flush = flush == "read" ? L2Flush::read : L2Flush::write;
  for (const auto& [k, val] : j.at("axes").items()) t.axes[k] = val.get<std::int64_t>();
  t.key_axes = j.value("key_axes", std::vector<std::string>{});  // absent in runs before it existed
  t.bytes_per_launch = number_at(j, "bytes_per_launch");
  t.flops_per_launch = number_at(j, "flops_per_launch");
  // Added to v1 before its release; read leniently so that earlier runs still load.
  t.bytes_read_per_launch = j.value("bytes_read_per_launch", 0.0);
  t.bytes_written_per_launch = j.value("bytes_written_per_launch", 0.0);
  t.flop_dtype = j.value("flop_dtype", "");
  t.memory_ceiling = j.value("memory_ceiling", "");
  t.baseline = j.at("baseline").get<std::string>();
  t.vendor = j.at("vendor").get<std::string>();
  t.noise_floor_ms = number_at(j, "noise_floor_ms");
  for (const auto& v : j.at("variants")) t.variants.push_back(variant_result_from_json(v));
  return t;
}

ojson to_json(const RunResults& r) {
  ojson targets = ojson::array();
  for (const auto& t : r.targets) targets.push_back(to_json(t));
  return ojson{{"schema", k_results_schema_name},
               {"schema_version", r.schema_version},
               {"run_id", r.run_id},
               {"created_utc", r.created_utc},
               {"hardware_key", r.hardware_key},
               {"ceilings", optional_json(r.ceilings, [](const RunCeilings& c) { return to_json(c); })},
               {"targets", targets}};
}

RunResults run_results_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object() || j.value("schema", "") != k_results_schema_name) {
      throw DataError("not an aisp results document (missing \"schema\": \"aisp.results\")");
    }
    RunResults r;
    r.schema_version = j.at("schema_version").get<int>();
    if (r.schema_version > k_results_schema_version) {
      throw DataError(fmt::format("results schema version {} is newer than this aisp reads ({})",
                                  r.schema_version, k_results_schema_version));
    }
    r.run_id = j.at("run_id").get<std::string>();
    r.created_utc = j.at("created_utc").get<std::string>();
    r.hardware_key = j.at("hardware_key").get<std::string>();
    r.ceilings = optional_from<RunCeilings>(j, "ceilings", run_ceilings_from_json);
    for (const auto& t : j.at("targets")) r.targets.push_back(target_result_from_json(t));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("malformed results document: ") + e.what());
  }
}

void derive_statistics(TargetResult& t, double noise_floor_ms) {
  const VariantResult* baseline = nullptr;
  const VariantResult* vendor = nullptr;
  for (auto& v : t.variants) {
    v.stats.reset();
    v.gb_per_s = v.tflop_per_s = 0;
    if (v.samples_ms.empty()) continue;
    v.stats = stats::summarize(v.samples_ms);
    const double seconds = v.stats->median * 1e-3;
    v.gb_per_s = t.bytes_per_launch / seconds * 1e-9;
    v.tflop_per_s = t.flops_per_launch / seconds * 1e-12;
  }
  // Comparisons only between PASS variants, and only against the declared baseline / vendor.
  for (const auto& v : t.variants) {
    if (v.verdict != Verdict::pass || !v.stats) continue;
    if (v.name == t.baseline) baseline = &v;
    if (v.name == t.vendor) vendor = &v;
  }
  const auto compare = [&](const VariantResult& num, const VariantResult& den) {
    const auto r = stats::ratio_of_medians(num.samples_ms, den.samples_ms);
    Comparison c{num.name, r.ratio, r.interval.low, r.interval.high, false};
    const bool above_floor = !under_noise_floor(num.stats->median, noise_floor_ms) &&
                             !under_noise_floor(den.stats->median, noise_floor_ms);
    c.significant = r.interval.valid && above_floor && (r.interval.low > 1.0 || r.interval.high < 1.0);
    return c;
  };
  for (auto& v : t.variants) {
    v.speedup_vs_baseline.reset();
    v.fraction_of_vendor.reset();
    if (v.verdict != Verdict::pass || !v.stats) continue;
    if (baseline && &v != baseline) v.speedup_vs_baseline = compare(*baseline, v);
    if (vendor && &v != vendor) v.fraction_of_vendor = compare(*vendor, v);
  }
}

}  // namespace aisp
