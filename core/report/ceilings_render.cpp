// `aisp hw peaks` as a table and as JSON: measured ceilings with the datasheet beside them.
#include <algorithm>
#include <fmt/format.h>

#include "core/ceilings/ceilings.hpp"

namespace aisp {

namespace {

std::string value_text(double v, std::string_view unit) {
  if (unit == k_unit_tflop_s) return fmt::format("{:.1f} {}", v, unit);
  if (unit == k_unit_us) return fmt::format("{:.2f} {}", v, unit);
  return fmt::format("{:.0f} {}", v, unit);
}

// One line on how the set was measured (schema 2), or that an old cache cannot say.
std::string provenance_line(const CeilingSet& s) {
  if (!s.provenance) return "provenance: none (a version-1 cache: measured before aisp checked for tools)\n";
  const CeilingProvenance& p = *s.provenance;
  std::string line = fmt::format("provenance: written {} by aisp {}{} ({}), {}", p.written_utc, s.aisp_git_sha,
                                 p.git_dirty == "true" ? "-dirty" : "", p.build_type,
                                 p.tool_free ? "no instrumentation tool" : "UNDER AN INSTRUMENTATION TOOL");
  if (p.gpu_state) {
    const GpuTelemetry& g = *p.gpu_state;
    if (g.sm_clock_mhz) line += fmt::format(", SM {} MHz", *g.sm_clock_mhz);
    if (g.mem_clock_mhz) line += fmt::format(", memory {} MHz", *g.mem_clock_mhz);
    if (g.temperature_c) line += fmt::format(", {} C", *g.temperature_c);
    if (g.throttle_reasons) {
      const std::string events = fmt::format("{}", fmt::join(g.throttle_reason_names, ", "));
      line += fmt::format(", clock events: {}", events.empty() ? "none" : events);
    }
    line += " after the last probe";
  }
  line += "\n";
  if (!p.unconfirmed.empty()) {
    line += fmt::format("  from a version-1 cache, not checked for tools: {}\n", fmt::join(p.unconfirmed, ", "));
  }
  return line;
}

}  // namespace

std::string render_peaks_table(const PeaksReport& r) {
  const CeilingSet& s = r.set;
  const auto ds = datasheet_for(s.gpu_name);
  std::string out = fmt::format("{} ({}), driver {}, {} SMs, L2 {:.0f} MiB\n", s.gpu_name, s.gpu_uuid,
                                s.driver_version, s.sm_count, static_cast<double>(s.l2_bytes) / (1 << 20));
  out += fmt::format("cache: {} ({})\n", r.path, r.cache_note);
  out += provenance_line(s);
  if (!ds) out += "datasheet: no table entry for this GPU model\n";
  std::vector<std::vector<std::string>> rows{
      {"ceiling", "measured", ds ? "datasheet (" + ds->model + ")" : "datasheet", "of datasheet", "method"}};
  for (const auto& c : s.entries) {
    // A plain flag and value: GCC 12 warns about std::optional<double> copies here (-Wmaybe-uninitialized).
    double sheet = 0;
    bool has_sheet = false;
    if (ds) {
      if (const auto v = ds->value(c.name)) {
        sheet = *v;
        has_sheet = true;
      }
    }
    if (!c.measured()) {
      rows.push_back({ceiling_label(c.name), "skipped", has_sheet ? value_text(sheet, c.unit) : "", "", c.skipped});
      continue;
    }
    const bool fresh = std::find(r.measured.begin(), r.measured.end(), c.name) != r.measured.end();
    rows.push_back({ceiling_label(c.name), value_text(c.value, c.unit), has_sheet ? value_text(sheet, c.unit) : "",
                    has_sheet ? fmt::format("{:.1f}%", 100 * c.value / sheet) : "",
                    c.method + (fresh || r.measured.empty() ? "" : " [cached " + c.measured_utc + "]")});
    if (!c.note.empty()) rows.push_back({"", "", "", "", "  " + c.note});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += fmt::format("{:<{}}", row[i], i + 1 == row.size() ? 0 : width[i] + 2);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (ds) out += fmt::format("datasheet values: {} (shown beside, never used instead)\n", ds->source);
  if (!r.errors.empty()) {
    out += "errors (no number cached for these: a probe whose output is wrong, or a value refused as "
           "implausible):\n";
    for (const auto& [name, why] : r.errors) out += fmt::format("  {}: {}\n", name, why);
  }
  return out;
}

nlohmann::ordered_json peaks_report_json(const PeaksReport& r) {
  using ojson = nlohmann::ordered_json;
  ojson datasheet = nullptr;
  if (const auto ds = datasheet_for(r.set.gpu_name)) {
    ojson values = ojson::object();
    for (const auto& [n, v] : ds->values) values[n] = v;
    datasheet = {{"model", ds->model}, {"source", ds->source}, {"values", values}};
  }
  ojson errors = ojson::array();
  for (const auto& [name, why] : r.errors) errors.push_back({{"name", name}, {"error", why}});
  return {{"cache", r.path},        {"cache_note", r.cache_note}, {"measured_now", r.measured},
          {"peaks", to_json(r.set)}, {"datasheet", datasheet},    {"errors", errors}};
}

}  // namespace aisp
