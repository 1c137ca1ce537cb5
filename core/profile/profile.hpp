// The profiler hand-off (docs/profiling.md): named Nsight Compute metric sets, the ncu command lines that
// capture and export them, the parser of `ncu --import --csv --page raw`, the per-launch combination of a
// variant's kernels, the declared-vs-measured DRAM bytes check and the side-by-side comparison table.
// Pure C++: the device layer (device/profiler.cpp) runs the processes, this file knows what they mean.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/profile/source_page.hpp"
#include "core/results/results.hpp"

namespace aisp::profile {

enum class MetricSet { minimal, memory, compute, full };
std::string_view to_string(MetricSet s);
std::optional<MetricSet> metric_set_from_string(std::string_view s);

// ncu --replay-mode: `kernel` replays each kernel until every counter pass is collected, `application`
// reruns the whole worker once per pass, `range` replays the NVTX range of the profiled launch as one unit
// (it then also sees work that is not a kernel, such as a cudaMemcpyAsync).
enum class ReplayMode { kernel, application, range };
std::string_view to_string(ReplayMode m);
std::optional<ReplayMode> replay_mode_from_string(std::string_view s);

// How a table row shows its number.
enum class Format { duration_ns, percent, bytes, bytes_per_second, count, ratio, text };

struct RowSpec {
  std::string label;  // "DRAM throughput"
  std::string key;    // an ncu metric name, or a derived key (k_derived_prefix...)
  Format format = Format::count;
};

// Derived quantities are computed by combine_launch() from ncu metrics; their keys start with this.
inline constexpr std::string_view k_derived_prefix = "aisp__";
inline constexpr const char* k_dram_bytes = "aisp__dram_bytes";  // read + write
inline constexpr const char* k_ld_sectors_per_request = "aisp__global_ld_sectors_per_request";
inline constexpr const char* k_st_sectors_per_request = "aisp__global_st_sectors_per_request";
inline constexpr const char* k_shared_per_block = "aisp__shared_mem_per_block";  // static + dynamic
inline constexpr const char* k_bank_conflicts = "aisp__shared_bank_conflicts";   // loads + stores
inline constexpr const char* k_kernel_count = "aisp__kernels";
inline constexpr const char* k_duration = "gpu__time_duration.sum";

struct SetSpec {
  std::vector<std::string> metrics;   // --metrics: every name the parser relies on
  std::vector<std::string> sections;  // --section: extra context whose metrics are read by pattern
  std::string ncu_set;                // --set (only `full`)
  std::vector<RowSpec> rows;          // the comparison table's fixed rows, in order
  bool stall_and_pipe_rows = false;   // add the top pipes and stall reasons (compute, full)
};
const SetSpec& set_spec(MetricSet s);

// --- command lines -------------------------------------------------------------------------------------

// The NVTX push/pop range around the one profiled launch of a variant. Not "profile/<variant>": ncu's
// --nvtx-include grammar reads '/' as the separator of nested push/pop ranges.
std::string nvtx_range_name(const std::string& variant_name);
// The --nvtx-include filter that selects exactly the kernels launched inside such a range.
std::string nvtx_include_filter();

struct CaptureRequest {
  std::string ncu;  // the ncu executable
  MetricSet set = MetricSet::minimal;
  ReplayMode replay = ReplayMode::kernel;
  bool lock_clocks_to_base = false;  // --clock-control base, only when the user asks; default none
  bool flush_caches = true;          // --cache-control all (cold targets) or none (hot targets)
  std::string report;                // output file, ending in .ncu-rep
  std::vector<std::string> app;      // the worker's argv (executable first)
};
std::vector<std::string> capture_command(const CaptureRequest& r);

// `ncu --import REPORT --csv --page raw --print-units base`: one row per profiled kernel.
std::vector<std::string> export_command(const std::string& ncu, const std::string& report);

// A command line as one shell-quoted string, for logs and profile.json (never executed through a shell).
std::string quote_command(const std::vector<std::string>& argv);

// --- parsing -------------------------------------------------------------------------------------------

struct Cell {
  double value = 0;
  std::string unit;  // normalized: "ns", "byte", "byte/s", "%", ... ("" for plain counts)
};

struct KernelRecord {
  std::string id;
  std::string name;   // "Kernel Name" as ncu prints it
  std::string block;  // "(256, 1, 1)"
  std::string grid;
  std::map<std::string, Cell> metrics;      // numeric cells, units normalized
  std::map<std::string, std::string> text;  // every other non-empty cell (device name, NVTX state, ...)
};

// Parses the output of export_command(): a header row of column names (metric names after the fixed
// "ID", "Process ID", ..., "CC" columns), a units row, then one row per kernel. Lines before the header
// (ncu's ==PROF== / ==WARNING== chatter) are skipped. Numbers may carry thousands separators; scaled units
// (Kbyte, usecond, Gbyte/s, ...) are converted to bytes, ns and per-second rates. Throws DataError with one
// line when the text has no header or a row is malformed.
std::vector<KernelRecord> parse_raw_csv(std::string_view text);

// The CSV reader under both exports: RFC 4180 records (quoted fields may hold commas, doubled quotes and
// newlines). Throws DataError on an unterminated quoted field.
std::vector<std::vector<std::string>> csv_records(std::string_view text);
// One ncu number: "1,234.5" -> 1234.5; nullopt for "n/a", "", "(256, 1, 1)" and anything else that is
// not one finite number.
std::optional<double> parse_number(std::string s);

// Converts `value` given in `unit` to the base unit; returns the base unit's name.
std::string normalize_unit(const std::string& unit, double& value);

// --- one launch --------------------------------------------------------------------------------------

// The numbers of one profiled launch: the kernels it ran combined (sums for counts, bytes and time, the
// duration-weighted mean for rates and percentages, the maximum for launch__ resources) plus the derived
// keys above.
struct LaunchMetrics {
  std::map<std::string, double> values;
  std::vector<std::string> kernel_names;
};
LaunchMetrics combine_launch(const std::vector<KernelRecord>& kernels);

// Measured DRAM bytes against the ladder's declared minimum (TargetResult.bytes_per_launch). Written data
// still in L2 when a kernel ends never reaches DRAM inside the profile, so up to one L2 of bytes can go
// missing: the comparison is judged only when the declared bytes are at least k_l2_margin L2s, which keeps
// that error under the tolerance.
inline constexpr double k_bytes_tolerance = 0.10;
inline constexpr double k_l2_margin = 10.0;
struct BytesCheck {
  double declared = 0;
  double measured = 0;
  double ratio = 0;       // measured / declared
  bool judged = true;     // declared >= k_l2_margin * L2 (or the L2 size is unknown)
  bool mismatch = false;  // judged and |ratio - 1| > k_bytes_tolerance
};
std::optional<BytesCheck> check_bytes(const LaunchMetrics& m, double declared_bytes, double l2_bytes = 0);

// The ladder-level verdict on the declaration: declared bytes are a minimum, so the variant that moves the
// fewest DRAM bytes should land within 10% of them. Empty when consistent (or when nothing was measured or
// judged), else one line saying which way it is off.
std::string declaration_finding(const std::vector<std::pair<std::string, BytesCheck>>& checks);

// --- one target --------------------------------------------------------------------------------------

enum class Status { profiled, no_kernels, skipped, failed };
std::string_view to_string(Status s);

struct VariantProfileData {
  std::string name;  // "ch07:copy:01_chunked"
  Status status = Status::failed;
  std::string reason;  // why not profiled (one line)
  std::string report;  // .ncu-rep path as written in profile.json (relative to the profile folder)
  std::string csv;     // exported raw CSV
  std::string log;     // ncu's console output
  std::vector<std::string> command;
  std::vector<KernelRecord> kernels;
  LaunchMetrics launch;
  std::optional<BytesCheck> bytes;
  // `--source N`: the Source page's export and its summary, or why there is none (the raw metrics above
  // stand either way).
  std::string source_csv;
  std::optional<SourceSummary> source;
  std::string source_error;
};

struct TargetProfileData {
  std::string name;  // "ch07:copy"
  AxisValues axes;
  CacheMode mode = CacheMode::cold;
  double bytes_per_launch = 0;  // declared
  double l2_bytes = 0;          // the device's L2 (0 = unknown)
  std::vector<VariantProfileData> variants;
};

struct ProfileRunData {
  MetricSet set = MetricSet::minimal;
  ReplayMode replay = ReplayMode::kernel;
  std::string clock_control = "none";
  std::string ncu;          // path
  std::string ncu_version;  // first "Version ..." line of `ncu --version`
  std::string device;       // GPU name
  std::vector<TargetProfileData> targets;
};

// Variants as columns, metrics as rows; one heading line per target. Meant for terminals and for the HTML
// report (which wraps the same rows).
struct ComparisonTable {
  std::string heading;
  std::vector<std::string> columns;            // "metric", then one per variant (file stem)
  std::vector<std::vector<std::string>> rows;  // label, then one cell per variant
  std::vector<std::string> notes;              // declaration finding, reasons for missing columns
};
ComparisonTable comparison_table(const TargetProfileData& t, MetricSet set);
std::string render_comparison(const ComparisonTable& t);  // aligned plain text

// Formats one number the way the table shows it ("1.23 ms", "2.87 TB/s", "91.2%", "32.0").
std::string format_value(double value, Format f);

// profile.json (schema "aisp.profile", version 1; docs/profiling.md).
nlohmann::ordered_json to_json(const ProfileRunData& run);

// The short summary that results.json carries for a profiled variant (`bench run --profile`).
VariantProfile summarize(const VariantProfileData& v, MetricSet set);

// One-line cause from ncu's console output: "" when it reported no error. ERR_NVGPUCTRPERM and the other
// reasons that make counters unreadable are named first.
std::string diagnose_ncu_output(std::string_view log);
// True when the cause means that no variant can be profiled on this machine (stop after the first).
bool is_machine_wide(std::string_view cause);
// True when ncu said that the filter matched no kernel.
bool no_kernels_profiled(std::string_view log);

}  // namespace aisp::profile
