#include "core/results/render.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace aisp {

std::optional<OutputFormat> output_format_from_string(std::string_view s) {
  if (s == "table") return OutputFormat::table;
  if (s == "json") return OutputFormat::json;
  if (s == "markdown") return OutputFormat::markdown;
  if (s == "csv") return OutputFormat::csv;
  return std::nullopt;
}

std::string format_duration_ms(double ms) {
  if (ms < 1e-3) return fmt::format("{:.0f} ns", ms * 1e6);
  if (ms < 1.0) return fmt::format("{:.2f} us", ms * 1e3);
  if (ms < 1000.0) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.2f} s", ms * 1e-3);
}

std::string format_facts(const std::vector<std::pair<std::string, std::string>>& facts) {
  // Short labels for the standard facts (device/kernel_facts.hpp), in the order people read them.
  struct Known {
    const char* name;
    const char* prefix;
    const char* suffix;
    bool hide_zero;
  };
  static constexpr Known k_known[] = {{"regs", "regs ", "", false},
                                      {"spill_bytes", "spill ", " B", false},
                                      {"local_bytes", "local ", " B", true},
                                      {"smem_bytes", "smem ", " B", true},
                                      {"occupancy_pct", "occ ", "%", false},
                                      {"blocks_per_sm", "", " blk/SM", false}};
  std::vector<std::string> parts;
  for (const Known& k : k_known) {
    for (const auto& [name, value] : facts) {
      if (name != k.name || (k.hide_zero && value == "0")) continue;
      std::string shown = value;
      // "75.0" reads better as "75": a predicted occupancy is never that precise.
      if (name == std::string("occupancy_pct")) {
        try {
          shown = fmt::format("{:.0f}", std::stod(value));
        } catch (const std::exception&) {
        }
      }
      parts.push_back(k.prefix + shown + k.suffix);
    }
  }
  for (const auto& [name, value] : facts) {
    const bool known = std::any_of(std::begin(k_known), std::end(k_known), [&](const Known& k) { return name == k.name; });
    if (!known) parts.push_back(name + " " + value);
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " \u00b7 ") + p;
  return out;
}

bool has_facts(const TargetResult& t) {
  return std::any_of(t.variants.begin(), t.variants.end(), [](const VariantResult& v) { return !v.facts.empty(); });
}

namespace {

using Row = std::vector<std::string>;

const Row k_header{"variant", "kind", "median", "95% CI of median", "throughput", "% of ceiling",
                   "speedup vs baseline [95% CI]", "% of vendor", "verdict"};

// "93.1% of DRAM copy (read + write)": the measured ceiling that bounds this result (core/results/roofline.hpp).
std::string ceiling_pct(const VariantResult& v) {
  if (!v.roofline) return "-";
  return fmt::format("{:.1f}% of {}", v.roofline->percent, ceiling_label(v.roofline->ceiling));
}

std::string throughput(const TargetResult& t, const VariantResult& v) {
  if (!v.stats) return "-";
  if (t.flops_per_launch > 0 && t.flops_per_launch >= t.bytes_per_launch) {
    return fmt::format("{:.1f} TFLOP/s", v.tflop_per_s);
  }
  if (t.bytes_per_launch > 0) return fmt::format("{:.0f} GB/s", v.gb_per_s);
  return "-";
}

// A speedup the harness does not call says why: an interval that holds 1.0 is no significant difference;
// one that excludes it was not called because a median is under 10x the timer's noise floor (the rule of
// derive_statistics), or else because the samples are too few for a reliable interval.
std::string speedup(const TargetResult& t, const VariantResult& v) {
  if (!v.speedup_vs_baseline) return "-";
  const auto& c = *v.speedup_vs_baseline;
  const std::string ci = fmt::format("{:.2f}x [{:.2f}, {:.2f}]", c.value, c.low, c.high);
  if (c.significant) return ci;
  if (c.low <= 1.0 && c.high >= 1.0) return ci + " no significant difference";
  const auto under_floor = [&](const VariantResult& x) {
    return x.stats && under_noise_floor(x.stats->median, t.noise_floor_ms);
  };
  const auto baseline = std::find_if(t.variants.begin(), t.variants.end(),
                                     [&](const VariantResult& x) { return x.name == t.baseline; });
  if (under_floor(v) || (baseline != t.variants.end() && under_floor(*baseline))) {
    return ci + " not called: under 10x the noise floor";
  }
  return ci + " not called: too few samples";
}

std::string vendor_pct(const VariantResult& v) {
  if (!v.fraction_of_vendor) return "-";
  const auto& c = *v.fraction_of_vendor;
  return fmt::format("{:.1f}% [{:.1f}, {:.1f}]", 100 * c.value, 100 * c.low, 100 * c.high);
}

Row row_of(const TargetResult& t, const VariantResult& v) {
  std::string verdict(to_string(v.verdict));
  if (v.telemetry && v.telemetry->throttled) verdict += " (throttled)";
  if (!v.reason.empty()) verdict += ": " + v.reason;
  const std::string name = v.name.substr(std::min(v.name.size(), t.name.size() + 1));
  if (!v.stats) return {name, std::string(to_string(v.kind)), "-", "-", "-", "-", "-", "-", verdict};
  const auto& s = *v.stats;
  return {name,
          std::string(to_string(v.kind)),
          format_duration_ms(s.median),
          fmt::format("[{}, {}] +-{:.2f}%", format_duration_ms(s.median_ci.low),
                      format_duration_ms(s.median_ci.high), 100 * s.rel_ci_half_width),
          throughput(t, v),
          ceiling_pct(v),
          speedup(t, v),
          vendor_pct(v),
          verdict};
}

std::string target_heading(const TargetResult& t) {
  std::string axes;
  for (const auto& [k, val] : t.axes) axes += fmt::format(" {}={}", k, val);
  return fmt::format("{} ({} L2, {} clock;{}; declared {:.3g} GB and {:.3g} GFLOP per launch)", t.name,
                     to_string(t.mode), to_string(t.clock), axes, t.bytes_per_launch * 1e-9,
                     t.flops_per_launch * 1e-9);
}

// The header and a row with a facts column before the verdict, for targets whose variants report facts.
Row with_facts(Row row, const std::string& facts) {
  row.insert(row.end() - 1, facts);
  return row;
}

// Display width: UTF-8 continuation bytes take no column (the facts' separator is one).
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string render_table(const std::vector<Row>& rows) {
  std::vector<std::size_t> width(rows.empty() ? 0 : rows.front().size(), 0);
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] + 2 - display_width(r[i]), ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "regs=64;occupancy_pct=75.0": every fact, unabridged, for tools.
std::string facts_csv(const VariantResult& v) {
  std::string out;
  for (const auto& [k, val] : v.facts) out += (out.empty() ? "" : ";") + k + "=" + val;
  return out;
}

}  // namespace

std::string render_results(const RunResults& r, OutputFormat f) {
  if (f == OutputFormat::json) return to_json(r).dump(2) + "\n";
  std::string out;
  if (f == OutputFormat::csv) {
    out += "target,variant,kind,verdict,reason,median_ms,ci_low_ms,ci_high_ms,samples,gb_per_s,"
           "tflop_per_s,speedup,speedup_low,speedup_high,speedup_significant,fraction_of_vendor,ceiling,"
           "percent_of_ceiling,facts\n";
    for (const auto& t : r.targets) {
      for (const auto& v : t.variants) {
        const auto* s = v.stats ? &*v.stats : nullptr;
        const auto* c = v.speedup_vs_baseline ? &*v.speedup_vs_baseline : nullptr;
        out += fmt::format(
            "{},{},{},{},{},{},{},{},{},{:.3f},{:.5f},{},{},{},{},{},{},{},{}\n", t.name, v.name,
            to_string(v.kind), to_string(v.verdict), csv_escape(v.reason),
            s ? fmt::format("{:.6g}", s->median) : "", s ? fmt::format("{:.6g}", s->median_ci.low) : "",
            s ? fmt::format("{:.6g}", s->median_ci.high) : "", v.samples_ms.size(), v.gb_per_s,
            v.tflop_per_s, c ? fmt::format("{:.4f}", c->value) : "",
            c ? fmt::format("{:.4f}", c->low) : "", c ? fmt::format("{:.4f}", c->high) : "",
            c ? (c->significant ? "true" : "false") : "",
            v.fraction_of_vendor ? fmt::format("{:.4f}", v.fraction_of_vendor->value) : "",
            v.roofline ? v.roofline->ceiling : "", v.roofline ? fmt::format("{:.2f}", v.roofline->percent) : "",
            csv_escape(facts_csv(v)));
      }
    }
    return out;
  }
  if (f == OutputFormat::table && r.ceilings) {
    out += r.ceilings->problem.empty()
               ? fmt::format("ceilings: measured on this GPU by aisp hw peaks ({})\n\n", r.ceilings->source)
               : "ceilings: none (" + r.ceilings->problem + "): no % of ceiling, no physics check\n\n";
  }
  for (const auto& t : r.targets) {
    const bool facts = has_facts(t);
    std::vector<Row> rows{facts ? with_facts(k_header, "facts") : k_header};
    for (const auto& v : t.variants) rows.push_back(facts ? with_facts(row_of(t, v), format_facts(v.facts)) : row_of(t, v));
    if (f == OutputFormat::table) {
      out += target_heading(t) + "\n" + render_table(rows) + "\n";
      continue;
    }
    out += "### " + md_escape(target_heading(t)) + "\n\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out += "|";
      for (const auto& cell : rows[i]) out += " " + md_escape(cell) + " |";
      out += "\n";
      if (i == 0) {
        out += "|";
        for (std::size_t c = 0; c < rows[i].size(); ++c) out += " --- |";
        out += "\n";
      }
    }
    out += "\n";
  }
  return out;
}

std::string render_catalogue(const std::vector<const TargetInfo*>& targets, OutputFormat f) {
  if (f == OutputFormat::json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto* t : targets) {
      nlohmann::ordered_json vs = nlohmann::ordered_json::array();
      for (const auto& v : t->variants) {
        vs.push_back({{"name", t->variant_name(v)}, {"kind", to_string(v.kind)},
                      {"summary", v.summary}, {"min_cc", v.min_cc}, {"features", v.features},
                      {"precision", v.precision}});
      }
      nlohmann::ordered_json axes = nlohmann::ordered_json::array();
      for (const auto& a : t->axes) {
        axes.push_back({{"name", a.name}, {"default", a.default_value}, {"default_sweep", a.default_sweep},
                        {"omit_at_default", a.omit_at_default}, {"help", a.help}});
      }
      arr.push_back({{"name", t->name()}, {"summary", t->summary}, {"clock", to_string(t->clock)},
                     {"default_mode", to_string(t->default_mode)}, {"hidden", t->hidden},
                     {"sampling_budget_s", t->sampling_budget_s}, {"axes", axes}, {"variants", vs}});
    }
    return arr.dump(2) + "\n";
  }
  std::string out;
  for (const auto* t : targets) {
    out += fmt::format("{}  {}{}\n", t->name(), t->summary, t->hidden ? "  (hidden)" : "");
    if (t->sampling_budget_s > 0) {
      out += fmt::format("    sampling budget {:g} s per variant unless --max-time sets one\n", t->sampling_budget_s);
    }
    for (const auto& a : t->axes) {
      out += fmt::format("    axis {}  {}{}{}\n", format_axis_default(a), a.help,
                         a.default_sweep.empty() ? "" : " (swept unless --axis sets it)",
                         a.omit_at_default ? " (left out of the key at its default)" : "");
    }
    std::vector<Row> rows;
    for (const auto& v : t->variants) {
      std::string req;
      if (v.min_cc > 0) req += fmt::format(" [sm_{}+]", v.min_cc);
      for (const auto& feat : v.features) req += " [" + feat + "]";
      rows.push_back({"    " + t->variant_name(v), std::string(to_string(v.kind)), v.summary + req});
    }
    std::size_t w0 = 0, w1 = 0;
    for (const auto& r : rows) {
      w0 = std::max(w0, r[0].size());
      w1 = std::max(w1, r[1].size());
    }
    for (const auto& r : rows) out += fmt::format("{:<{}}  {:<{}}  {}\n", r[0], w0, r[1], w1, r[2]);
    out += "\n";
  }
  return out;
}

}  // namespace aisp
