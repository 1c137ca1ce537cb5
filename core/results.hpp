// Result schema v1: what one `aisp bench run` measured. Documented field by field in
// docs/results-schema.md; the JSON written to results.json is exactly to_json(RunResults).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/axes.hpp"
#include "core/registry.hpp"
#include "core/stats.hpp"
#include "core/verdict.hpp"

namespace aisp {

inline constexpr int k_results_schema_version = 1;
inline constexpr const char* k_results_schema_name = "aisp.results";

struct Mismatch {
  std::uint64_t index = 0;
  double got = 0;
  double expected = 0;
};

// The correctness gate's findings for one variant (docs/measurement.md "Correctness gate").
struct Validation {
  std::vector<std::uint64_t> seeds;      // the seeds validated, in order
  std::string failed_check;              // empty when passed; else "mismatch", "input_modified",
                                         // "output_unchanged_between_seeds", "timed_output", "launch"
  std::string output_name;               // which output failed (when one did)
  std::uint64_t elements_checked = 0;    // per seed, all outputs together
  std::uint64_t mismatches = 0;          // count over the failing check
  double max_abs_error = 0;              // over every validated launch
  double max_rel_error = 0;
  std::vector<Mismatch> first_mismatches;  // lowest indices first, at most 10
  bool timed_output_checked = false;     // a timed launch's output was compared too
  bool passed() const { return failed_check.empty(); }
};

// A derived comparison with its bootstrap interval, e.g. speedup vs the baseline.
struct Comparison {
  std::string against;   // variant name compared with
  double value = 0;      // ratio of medians (>1 = faster than `against` for speedups)
  double low = 0;
  double high = 0;
  bool significant = false;  // interval excludes 1.0 and neither side is under the noise floor
};

struct VariantResult {
  std::string name;   // "ch07:copy:03_vectorized"
  int step = 0;
  std::string slug;
  VariantKind kind = VariantKind::step;
  std::string summary;
  std::string precision;  // declared precision change, empty = the ladder's
  Verdict verdict = Verdict::error;
  std::string reason;     // why the verdict, in one line (empty for a plain PASS)

  std::optional<Validation> validation;
  std::vector<double> samples_ms;  // raw per-launch times in milliseconds, in the order taken
  int batch = 1;                   // launches per timed interval (sample = interval / batch)
  std::optional<stats::Summary> stats;  // over samples_ms
  double gb_per_s = 0;             // declared bytes / median
  double tflop_per_s = 0;          // declared FLOPs / median
  std::optional<Comparison> speedup_vs_baseline;
  std::optional<Comparison> fraction_of_vendor;  // vendor median / this median (1.0 = vendor speed)
  std::vector<std::string> notes;  // non-fatal observations (blocking-kernel timeout, etc.)
};

struct TargetResult {
  std::string name;     // "ch07:copy"
  std::string summary;
  ClockKind clock = ClockKind::gpu;
  CacheMode mode = CacheMode::cold;
  AxisValues axes;
  double bytes_per_launch = 0;  // declared minimum DRAM bytes of one launch
  double flops_per_launch = 0;  // declared FLOPs of one launch
  std::string baseline;         // variant name of the baseline (speedups are against it), may be empty
  std::string vendor;           // variant name of the vendor reference, may be empty
  double noise_floor_ms = 0;    // median time of an empty timed region on this device (0 = unknown)
  std::vector<VariantResult> variants;
};

struct RunResults {
  int schema_version = k_results_schema_version;
  std::string run_id;        // the run folder's name
  std::string created_utc;   // ISO 8601
  std::string hardware_key;
  std::vector<TargetResult> targets;
};

nlohmann::ordered_json to_json(const RunResults& r);
nlohmann::ordered_json to_json(const TargetResult& t);
nlohmann::ordered_json to_json(const VariantResult& v);

// Throws DataError for a document that is not a results document or has a newer schema version.
RunResults run_results_from_json(const nlohmann::json& j);
TargetResult target_result_from_json(const nlohmann::json& j);
VariantResult variant_result_from_json(const nlohmann::json& j);

// Fills stats, throughput, speedups and fraction of vendor from the raw samples of every PASS variant.
// `noise_floor_ms` (0 = unknown) marks comparisons of variants under 10x the floor as not significant.
void derive_statistics(TargetResult& t, double noise_floor_ms = 0);

}  // namespace aisp
