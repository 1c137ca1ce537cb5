// Metric sets, ncu command lines, the raw-CSV parser and the per-launch combination (core/profile/profile.hpp).
#include "core/profile/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <set>

#include "core/base/error.hpp"

namespace aisp::profile {

std::string_view to_string(MetricSet s) {
  switch (s) {
    case MetricSet::minimal: return "minimal";
    case MetricSet::memory: return "memory";
    case MetricSet::compute: return "compute";
    case MetricSet::full: return "full";
  }
  return "?";
}

std::optional<MetricSet> metric_set_from_string(std::string_view s) {
  for (MetricSet m : {MetricSet::minimal, MetricSet::memory, MetricSet::compute, MetricSet::full}) {
    if (to_string(m) == s) return m;
  }
  return std::nullopt;
}

std::string_view to_string(ReplayMode m) {
  switch (m) {
    case ReplayMode::kernel: return "kernel";
    case ReplayMode::application: return "application";
    case ReplayMode::range: return "range";
  }
  return "?";
}

std::optional<ReplayMode> replay_mode_from_string(std::string_view s) {
  for (ReplayMode m : {ReplayMode::kernel, ReplayMode::application, ReplayMode::range}) {
    if (to_string(m) == s) return m;
  }
  return std::nullopt;
}

namespace {

// Metric names are those of the Nsight Compute 2025 "Kernel Profiling Guide" and of the sections that
// ship with it (SpeedOfLight, LaunchStats, Occupancy, MemoryWorkloadAnalysis_Tables): each is collected by
// name, so ncu refuses the run up front if a name is wrong instead of leaving a silent gap.
const std::vector<std::string> k_minimal_metrics{
    "gpu__time_duration.sum",
    "dram__bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",  // achieved occupancy
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
};

const std::vector<std::string> k_memory_metrics{
    "gpu__time_duration.sum",
    "dram__bytes.sum.per_second",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_bytes.sum",
    "l1tex__t_sector_hit_rate.pct",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
};

// Pipe utilization and stall reasons differ in name between architectures, so they come from the
// ComputeWorkloadAnalysis and WarpStateStats sections and are read by pattern (see comparison_table).
const std::vector<std::string> k_compute_metrics{
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed.avg.per_cycle_active",            // IPC
    "sm__inst_issued.avg.pct_of_peak_sustained_active",  // issue slots busy
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
};

const std::vector<RowSpec> k_minimal_rows{
    {"duration", k_duration, Format::duration_ns},
    {"DRAM throughput", "dram__bytes.sum.per_second", Format::bytes_per_second},
    {"DRAM throughput, % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed", Format::percent},
    {"memory throughput, % of peak", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
     Format::percent},
    {"SM throughput, % of peak", "sm__throughput.avg.pct_of_peak_sustained_elapsed", Format::percent},
    {"achieved occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", Format::percent},
    {"registers / thread", "launch__registers_per_thread", Format::count},
    {"shared memory / block", k_shared_per_block, Format::bytes},
};

const std::vector<RowSpec> k_memory_rows{
    {"duration", k_duration, Format::duration_ns},
    {"DRAM throughput", "dram__bytes.sum.per_second", Format::bytes_per_second},
    {"DRAM bytes read", "dram__bytes_read.sum", Format::bytes},
    {"DRAM bytes written", "dram__bytes_write.sum", Format::bytes},
    {"L2 bytes", "lts__t_bytes.sum", Format::bytes},
    {"L2 hit rate", "lts__t_sector_hit_rate.pct", Format::percent},
    {"L1 bytes", "l1tex__t_bytes.sum", Format::bytes},
    {"L1 hit rate", "l1tex__t_sector_hit_rate.pct", Format::percent},
    {"global load sectors / request", k_ld_sectors_per_request, Format::ratio},
    {"global store sectors / request", k_st_sectors_per_request, Format::ratio},
    {"shared bank conflicts", k_bank_conflicts, Format::count},
};

const std::vector<RowSpec> k_compute_rows{
    {"duration", k_duration, Format::duration_ns},
    {"SM throughput, % of peak", "sm__throughput.avg.pct_of_peak_sustained_elapsed", Format::percent},
    {"IPC (executed, per active cycle)", "sm__inst_executed.avg.per_cycle_active", Format::ratio},
    {"issue slots busy", "sm__inst_issued.avg.pct_of_peak_sustained_active", Format::percent},
    {"schedulers issuing", "smsp__issue_active.avg.pct_of_peak_sustained_active", Format::percent},
    {"achieved occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", Format::percent},
};

template <class T>
void append_unique(std::vector<T>& to, const std::vector<T>& from, auto key) {
  for (const auto& x : from) {
    if (std::none_of(to.begin(), to.end(), [&](const T& y) { return key(y) == key(x); })) to.push_back(x);
  }
}

SetSpec make_full() {
  SetSpec s;
  s.ncu_set = "full";
  const auto same = [](const std::string& m) { return m; };
  append_unique(s.metrics, k_minimal_metrics, same);
  append_unique(s.metrics, k_memory_metrics, same);
  append_unique(s.metrics, k_compute_metrics, same);
  const auto by_key = [](const RowSpec& r) { return r.key; };
  append_unique(s.rows, k_minimal_rows, by_key);
  append_unique(s.rows, k_memory_rows, by_key);
  append_unique(s.rows, k_compute_rows, by_key);
  s.stall_and_pipe_rows = true;
  return s;
}

}  // namespace

const SetSpec& set_spec(MetricSet s) {
  static const SetSpec minimal{k_minimal_metrics, {}, "", k_minimal_rows, false};
  static const SetSpec memory{k_memory_metrics, {}, "", k_memory_rows, false};
  static const SetSpec compute{
      k_compute_metrics, {"ComputeWorkloadAnalysis", "WarpStateStats"}, "", k_compute_rows, true};
  static const SetSpec full = make_full();
  switch (s) {
    case MetricSet::minimal: return minimal;
    case MetricSet::memory: return memory;
    case MetricSet::compute: return compute;
    case MetricSet::full: return full;
  }
  return minimal;
}

// --- command lines -------------------------------------------------------------------------------------

std::string nvtx_range_name(const std::string& variant_name) { return "profile:" + variant_name; }

// regex: so that the colons of the variant name need no escaping; the trailing '/' marks a push/pop range.
std::string nvtx_include_filter() { return "regex:profile:.*/"; }

std::vector<std::string> capture_command(const CaptureRequest& r) {
  const SetSpec& spec = set_spec(r.set);
  std::vector<std::string> argv{
      r.ncu, "--export", r.report, "--force-overwrite", "--replay-mode", std::string(to_string(r.replay)),
      // Never touch the card's clocks unless asked: ncu's default would lock
      // them to base, and the numbers would no longer match `bench run`.
      "--clock-control", r.lock_clocks_to_base ? "base" : "none", "--cache-control",
      r.flush_caches ? "all" : "none", "--nvtx", "--nvtx-include", nvtx_include_filter()};
  if (!spec.ncu_set.empty()) {
    argv.push_back("--set");
    argv.push_back(spec.ncu_set);
  }
  for (const auto& s : spec.sections) {
    argv.push_back("--section");
    argv.push_back(s);
  }
  std::string metrics;
  for (const auto& m : spec.metrics) metrics += (metrics.empty() ? "" : ",") + m;
  argv.push_back("--metrics");
  argv.push_back(metrics);
  argv.insert(argv.end(), r.app.begin(), r.app.end());
  return argv;
}

std::vector<std::string> export_command(const std::string& ncu, const std::string& report) {
  return {ncu, "--import", report, "--csv", "--page", "raw", "--print-units", "base"};
}

std::string quote_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// --- parsing -------------------------------------------------------------------------------------------

std::vector<std::vector<std::string>> csv_records(std::string_view text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        record.push_back(std::move(field));
        records.push_back(std::move(record));
      }
      record.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw DataError("ncu CSV: unterminated quoted field");
  if (any || !field.empty()) {
    record.push_back(std::move(field));
    records.push_back(std::move(record));
  }
  return records;
}

std::optional<double> parse_number(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

const std::set<std::string, std::less<>> k_identity_columns{
    "ID",     "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
    "Stream", "Block Size", "Grid Size",    "Device",    "CC"};

double prefix_scale(std::string& unit) {
  static const std::pair<char, double> prefixes[] = {
      {'K', 1e3}, {'M', 1e6}, {'G', 1e9}, {'T', 1e12}, {'P', 1e15}};
  // "Kbyte", "Gcycle", "MB": an upper-case prefix before a lower-case unit name or a bare "B".
  if (unit.size() < 2 || (!std::islower(static_cast<unsigned char>(unit[1])) && unit.substr(1) != "B")) {
    return 1.0;
  }
  for (const auto& [p, scale] : prefixes) {
    if (unit[0] == p) {
      unit.erase(0, 1);
      return scale;
    }
  }
  return 1.0;
}

// Seconds per time unit, in both spellings ncu uses ("nsecond" in auto units, "ns" with --print-units
// base in 2025.x); 0 for anything that is not a time.
double seconds_per(const std::string& unit) {
  if (unit == "second" || unit == "s") return 1.0;
  if (unit == "msecond" || unit == "ms") return 1e-3;
  if (unit == "usecond" || unit == "us") return 1e-6;
  if (unit == "nsecond" || unit == "ns") return 1e-9;
  return 0.0;
}

}  // namespace

std::string normalize_unit(const std::string& unit, double& value) {
  if (unit.empty() || unit == "%") return unit;
  const auto slash = unit.find('/');
  std::string num = unit.substr(0, slash);
  std::string den = slash == std::string::npos ? "" : unit.substr(slash + 1);
  if (const double s = seconds_per(num); s > 0) {
    value *= s * 1e9;  // durations in nanoseconds: ncu's own base for gpu__time_duration
    num = "ns";
  } else {
    value *= prefix_scale(num);
  }
  if (const double s = seconds_per(den); s > 0) {
    value /= s;  // rates per second
    den = "s";
  }
  return den.empty() ? num : num + "/" + den;
}

std::vector<KernelRecord> parse_raw_csv(std::string_view text) {
  const auto records = csv_records(text);
  std::size_t header = 0;
  while (header < records.size() && (records[header].empty() || records[header][0] != "ID")) ++header;
  if (header == records.size()) {
    throw DataError(
        "ncu CSV: no header row (a row starting with \"ID\"); not the output of --page raw --csv");
  }
  if (header + 1 >= records.size()) throw DataError("ncu CSV: header without a units row");
  const auto& names = records[header];
  const auto& units = records[header + 1];
  if (units.size() != names.size()) {
    throw DataError(
        fmt::format("ncu CSV: units row has {} cells, header has {}", units.size(), names.size()));
  }
  std::vector<KernelRecord> kernels;
  for (std::size_t r = header + 2; r < records.size(); ++r) {
    const auto& row = records[r];
    if (row.size() == 1 && row[0].empty()) continue;
    if (row.size() != names.size()) {
      throw DataError(
          fmt::format("ncu CSV: row {} has {} cells, header has {}", r + 1, row.size(), names.size()));
    }
    KernelRecord k;
    for (std::size_t c = 0; c < names.size(); ++c) {
      const std::string& name = names[c];
      const std::string& cell = row[c];
      if (name == "ID") k.id = cell;
      if (name == "Kernel Name") k.name = cell;
      if (name == "Block Size") k.block = cell;
      if (name == "Grid Size") k.grid = cell;
      if (cell.empty()) continue;
      const auto number = k_identity_columns.count(name) ? std::nullopt : parse_number(cell);
      if (!number) {
        k.text[name] = cell;
        continue;
      }
      Cell m{*number, ""};
      m.unit = normalize_unit(units[c], m.value);
      k.metrics[name] = m;
    }
    kernels.push_back(std::move(k));
  }
  return kernels;
}

// --- one launch --------------------------------------------------------------------------------------

LaunchMetrics combine_launch(const std::vector<KernelRecord>& kernels) {
  LaunchMetrics out;
  struct Acc {
    double sum = 0, weighted = 0, weight = 0, max = -INFINITY;
  };
  std::map<std::string, Acc> acc;
  for (const auto& k : kernels) {
    out.kernel_names.push_back(k.name);
    const auto d = k.metrics.find(k_duration);
    // Rates and percentages of several kernels combine weighted by each kernel's share of the time, so
    // that a 2 us helper kernel cannot drag a 2 ms kernel's occupancy down to the mean of the two.
    const double w = d != k.metrics.end() && d->second.value > 0 ? d->second.value : 1.0;
    for (const auto& [name, cell] : k.metrics) {
      auto& a = acc[name];
      a.sum += cell.value;
      a.weighted += w * cell.value;
      a.weight += w;
      a.max = std::max(a.max, cell.value);
    }
  }
  const auto ends_with = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const auto& [name, a] : acc) {
    if (name.rfind("launch__", 0) == 0) {
      out.values[name] = a.max;
    } else if (ends_with(name, ".sum")) {
      out.values[name] = a.sum;
    } else {
      out.values[name] = a.weighted / a.weight;
    }
  }
  auto& v = out.values;
  const auto get = [&](const char* key) -> std::optional<double> {
    const auto it = v.find(key);
    return it == v.end() ? std::nullopt : std::optional<double>(it->second);
  };
  v[k_kernel_count] = static_cast<double>(kernels.size());
  const auto rd = get("dram__bytes_read.sum"), wr = get("dram__bytes_write.sum");
  if (rd && wr) v[k_dram_bytes] = *rd + *wr;
  const auto ratio = [&](const char* key, const char* num, const char* den) {
    const auto n = get(num), d = get(den);
    if (n && d && *d > 0) v[key] = *n / *d;
  };
  ratio(k_ld_sectors_per_request, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum");
  ratio(k_st_sectors_per_request, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum");
  const auto st = get("launch__shared_mem_per_block_static"),
             dy = get("launch__shared_mem_per_block_dynamic");
  if (st || dy) v[k_shared_per_block] = st.value_or(0) + dy.value_or(0);
  const auto bl = get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum");
  const auto bs = get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum");
  if (bl || bs) v[k_bank_conflicts] = bl.value_or(0) + bs.value_or(0);
  return out;
}

std::optional<BytesCheck> check_bytes(const LaunchMetrics& m, double declared_bytes, double l2_bytes) {
  const auto it = m.values.find(k_dram_bytes);
  if (it == m.values.end() || declared_bytes <= 0) return std::nullopt;
  BytesCheck c;
  c.declared = declared_bytes;
  c.measured = it->second;
  c.ratio = c.measured / c.declared;
  c.judged = l2_bytes <= 0 || declared_bytes >= k_l2_margin * l2_bytes;
  c.mismatch = c.judged && std::fabs(c.ratio - 1.0) > k_bytes_tolerance;
  return c;
}

std::string declaration_finding(const std::vector<std::pair<std::string, BytesCheck>>& all) {
  std::vector<std::pair<std::string, BytesCheck>> checks;
  for (const auto& c : all) {
    if (c.second.judged) checks.push_back(c);
  }
  if (checks.empty()) return {};
  const auto leanest = std::min_element(checks.begin(), checks.end(), [](const auto& a, const auto& b) {
    return a.second.ratio < b.second.ratio;
  });
  const auto& [name, c] = *leanest;
  if (c.ratio < 1.0 - k_bytes_tolerance) {
    return fmt::format(
        "declaration mismatch: {} moved {:.3g} GB through DRAM, {:.2f}x the declared minimum of "
        "{:.3g} GB; the declaration overstates the work (and every GB/s), unless the data stayed in L2",
        name, c.measured * 1e-9, c.ratio, c.declared * 1e-9);
  }
  if (c.ratio > 1.0 + k_bytes_tolerance) {
    return fmt::format(
        "declaration mismatch: even the leanest variant, {}, moved {:.2f}x the declared minimum of "
        "{:.3g} GB; the declaration may be too low, or every variant over-fetches",
        name, c.ratio, c.declared * 1e-9);
  }
  return {};
}

}  // namespace aisp::profile
