// Result schema v1: what one `aisp bench run` measured. Documented field by field in
// docs/results-schema.md; the JSON written to results.json is exactly to_json(RunResults).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/base/axes.hpp"
#include "core/ceilings/ceilings.hpp"
#include "core/base/registry.hpp"
#include "core/measure/stats.hpp"
#include "core/measure/verdict.hpp"

namespace aisp {

inline constexpr int k_results_schema_version = 1;
inline constexpr const char* k_results_schema_name = "aisp.results";

struct Mismatch {
  std::uint64_t index = 0;
  double got = 0;
  double expected = 0;
};

// The fresh-inputs check of one variant (docs/trust.md "State kept between launches"): launches on
// inputs from seeds drawn at run time, never used before, checked for correctness and timed.
struct FreshInputsRecord {
  std::vector<std::uint64_t> seeds;  // the fresh seeds, in order
  double fresh_ms = 0;               // median of the launches on fresh inputs
  double seen_ms = 0;                // what it was compared with (see compared_with)
  std::string compared_with;         // "timed median" or "repeat launches" (fresh_input_baseline)
  double ratio = 0;                  // fresh_ms / seen_ms
};

// The correctness gate's findings for one variant (docs/measurement.md "Correctness gate").
struct Validation {
  std::vector<std::uint64_t> seeds;      // the seeds validated, in order
  std::string failed_check;              // empty when passed; else "mismatch", "input_modified",
                                         // "output_unchanged_between_seeds", "timed_output",
                                         // "fresh_inputs", "launch"
  std::string output_name;               // which output failed (when one did)
  std::uint64_t elements_checked = 0;    // per seed, all outputs together
  std::uint64_t mismatches = 0;          // count over the failing check
  double max_abs_error = 0;              // over every validated launch
  double max_rel_error = 0;
  std::vector<Mismatch> first_mismatches;  // lowest indices first, at most 10
  bool timed_output_checked = false;     // a timed launch's output was compared too
  bool reference_masked = false;         // the references were masked while the variant ran
  std::optional<FreshInputsRecord> fresh_inputs;  // absent when the check did not run
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

// The audit's findings for one variant (docs/trust.md): work outside the timed window, on another device,
// or hidden from the GPU clock.
struct AuditRecord {
  std::string method;                 // "cupti" (activity records + timing) or "timing" (CUPTI absent)
  int launches = 0;                   // audited launches
  double host_launch_ms = 0;          // longest host time spent inside launch()
  double event_ms = 0;                // the matching timed interval
  double drain_ms = 0;                // longest wait for the device to go idle after the end event
  std::vector<std::string> findings;  // empty = clean; else one line each (kernel name, stream, times)
  std::vector<std::string> points;    // where they were taken: "before validation", "timed round 5", ...
};

// NVML telemetry over a variant's sampling (docs/measurement.md "Telemetry").
struct TelemetryRecord {
  double sm_clock_mhz_min = 0, sm_clock_mhz_max = 0;
  double power_w_max = 0;
  double temperature_c_max = 0;
  std::vector<std::string> throttle_reasons;  // every reason seen while sampling
  bool throttled = false;  // power or thermal throttling, or the SM clock moved more than 5%
};

// An Nsight Compute profile of one variant, taken after timing by `bench run --profile`
// (docs/profiling.md). Written to results.json only when present.
struct VariantProfile {
  std::string set;                        // "minimal", "memory", "compute" or "full"
  std::string report;                     // the .ncu-rep, relative to the run folder ("" when none)
  std::string json;                       // profile.json with every kernel's metrics, same base
  std::string error;                      // why there is no profile; empty when profiled
  std::map<std::string, double> metrics;  // the set's headline numbers: ncu metric names, base units
  std::optional<double> dram_bytes_ratio; // measured / declared DRAM bytes (memory and full sets)
  bool bytes_mismatch = false;            // dram_bytes_ratio outside 1 +- 10%
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
  std::optional<AuditRecord> audit;
  std::optional<TelemetryRecord> telemetry;
  std::optional<VariantProfile> profile;
  std::optional<RooflinePlacement> roofline;  // against the run's measured ceilings (core/results/roofline.hpp)
  // What the variant reported about its kernels (VariantBase::facts): ("regs", "64"), ("occupancy_pct",
  // "75.0"), ... in the variant's order. Empty when it reports none; written to results.json only then.
  std::vector<std::pair<std::string, std::string>> facts;
};

struct TargetResult {
  std::string name;     // "ch07:copy"
  std::string summary;
  ClockKind clock = ClockKind::gpu;
  CacheMode mode = CacheMode::cold;
  L2Flush l2_flush = L2Flush::read;  // cold mode only; results written before the field: write
  AxisValues axes;  // the point measured, less omit_at_default axes at their default (recorded_axes)
  // The target's axes that are always in `axes` (key_axis_names): a stored configuration lacking one of them
  // was stored before that axis existed. Empty in runs written before the field (and for targets without
  // axes): --update-expectations then prunes nothing.
  std::vector<std::string> key_axes;
  double bytes_per_launch = 0;  // declared minimum DRAM bytes of one launch
  double flops_per_launch = 0;  // declared FLOPs of one launch
  // Optional refinements of the declared work, for placement against the ceilings (core/results/roofline.hpp):
  double bytes_read_per_launch = 0;     // of bytes_per_launch, read (0 and 0 = undeclared: a copy mix)
  double bytes_written_per_launch = 0;  // of bytes_per_launch, written
  std::string flop_dtype;               // "fp32", "bf16", ...: which peak rate bounds the FLOPs
  std::string memory_ceiling;           // a named ceiling for the bytes instead of DRAM ("p2p_1_to_0_peer")
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
  std::optional<RunCeilings> ceilings;  // what results were placed against (null: not looked up)
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

// The rule derive_statistics applies: a median under 10x a known noise floor is too close to it to call.
inline bool under_noise_floor(double median_ms, double noise_floor_ms) {
  return noise_floor_ms > 0 && median_ms < 10 * noise_floor_ms;
}

}  // namespace aisp
