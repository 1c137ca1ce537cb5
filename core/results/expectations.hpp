// Expectations: what each variant of a ladder is expected to measure on one kind of hardware,
// stored next to the ladder as chapters/chNN_*/<ladder>/expectations_<hardware key>.json: one file
// per hardware key holding one or more configurations (mode, clock and axis values: the points of a
// sweep, or a hot and a cold run), each with its variants. Written
// only by `aisp bench run --update-expectations`, read by `aisp bench check` and `aisp report
// --update-readme`. Format, verdicts and thresholds: docs/regression-gating.md.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/axes.hpp"
#include "core/results/run_folder.hpp"

namespace aisp {

// v2: "configurations": [...]; v1 (still read): one configuration at the top level.
inline constexpr int k_expectations_schema_version = 2;
inline constexpr const char* k_expectations_schema_name = "aisp.expectations";

// Where one variant's expectation was measured (from the run's manifest.json).
struct ExpectationProvenance {
  std::string run_id;
  std::string date; // the run's created_utc
  std::string git_sha;
  std::string git_dirty; // "true", "false" or "unknown"
  std::string device;
  int driver = 0;  // CUDA driver API version
  int runtime = 0; // CUDA runtime version
  std::string clocks_policy;
  std::string mode; // "cold" or "hot"
};

// A ratio of medians measured in one run, with its bootstrap 95% interval.
struct SpeedupExpectation {
  double value = 0, low = 0, high = 0;
};

struct VariantExpectation {
  std::string name; // "ch07:copy:03_vectorized"
  std::string kind; // "baseline", "step", "optimized", "vendor"
  double median_ms = 0;
  double ci_low_ms = 0; // the median's interval
  double ci_high_ms = 0;
  std::size_t samples = 0; // samples the median was taken over
  double gb_per_s = 0;
  double tflop_per_s = 0;
  std::optional<double> percent_of_ceiling;
  std::string ceiling; // the ceiling's name, when known
  std::optional<SpeedupExpectation> speedup_vs_baseline;
  // Vendor median / this median, measured in the same run as this entry (absent in files written
  // before it existed, for the vendor itself, and when the run had no passing vendor). `bench
  // check` judges a variant by it when the vendor moved (MACHINE-DRIFT): a ratio taken within one
  // run stays right even after a partial update re-measured the vendor, or this variant, alone.
  std::optional<SpeedupExpectation> fraction_of_vendor;
  // What the variant reported (VariantBase::facts: a serving ladder's goodput, TTFT and TPOT, a kernel's
  // registers), sorted by name. Taken from one launch like the timed ones, so without an interval; absent
  // in files written before it was stored. Never judged by `bench check`: shown in the README's tables.
  std::vector<std::pair<std::string, std::string>> facts;
  // NVML's clock-event reasons when the GPU throttled (power, heat) or its SM clock moved more than 5% while
  // this variant was sampled (the run's `(throttled)`); empty when it did not, and in files written before
  // it was stored. Never judged by `bench check`: the README's table says it beside the measurement.
  std::vector<std::string> throttle_reasons;
  bool throttled = false;
  ExpectationProvenance provenance;
};

// One configuration of a ladder's expectations file: where (hardware), how (mode, clock) and at which
// axis values its variants were measured.
struct Expectations {
  int schema_version = k_expectations_schema_version;  // of the file it was read from
  std::string target; // "ch07:copy"
  std::string hardware_key;
  std::string mode; // the configuration every entry was measured in
  std::string clock;
  AxisValues axes;
  std::vector<VariantExpectation> variants; // sorted by name

  const VariantExpectation* find(const std::string& variant) const;
};

// The configuration measured in `mode` and `clock` at `axes`, or nullptr.
const Expectations* find_configuration(const std::vector<Expectations>& configurations, const std::string& mode,
                                       const std::string& clock, const AxisValues& axes);

// The mode a configuration is keyed by: "hot", "cold" (L2 flushed by reading, the default) or "cold
// (write flush)" (flushed by writing: every cold configuration stored before the flush was recorded).
// Results of one flush are never compared with expectations of the other (docs/measurement-methods.md).
inline constexpr const char* k_cold_write_flush_mode = "cold (write flush)";
std::string configuration_mode(const TargetResult& t);

// "mode cold, gpu clock, n=1024": a configuration in one phrase.
std::string configuration_text(const std::string& mode, const std::string& clock, const AxisValues& axes);

// One file (schema v2) holding `configurations`, which must share target and hardware key (else
// std::invalid_argument). Stable key order; numbers rounded to 6 significant digits so that a
// re-measurement diffs as a few changed digits; configurations sorted by mode, clock, then axes;
// variants sorted by name (which is ladder order: "01_..." < "02_..." < "vendor_...").
std::string expectations_to_text(const std::vector<Expectations>& configurations);
std::string expectations_to_text(const Expectations& e);  // a file with one configuration
// The file's configurations (a v1 file has one). Throws DataError naming `origin` for invalid
// JSON, another document, a newer schema, missing fields or two configurations at the same point.
std::vector<Expectations> expectations_from_text(const std::string& text, const std::string& origin);

// The one folder of target "chNN:ladder": the unique chapters_dir/chNN_*/ladder/. Throws UsageError
// when there is none or more than one.
std::string ladder_folder(const std::string& chapters_dir, const std::string& target);
std::string expectations_path(const std::string& chapters_dir, const std::string& target,
                              const std::string& hardware_key);

// The file's configurations; nullopt when the file does not exist; DataError when it cannot be
// trusted.
std::optional<std::vector<Expectations>> read_expectations(const std::string& path);
// Every configuration of every expectations_*.json of a ladder folder, sorted by hardware key
// (then as stored); DataError for a file that is corrupt.
std::vector<Expectations> read_all_expectations(const std::string& folder);

// What --update-expectations did for one target.
struct ExpectationUpdate {
  std::string target;
  std::string path; // empty when no folder could be found
  bool written = false;
  std::string error; // non-empty: nothing written, and why (corrupt file, no folder, ...)
  std::vector<std::string>
      notes; // per variant: "ch07:copy:01_chunked: 9.500 ms (was 9.612 ms)", ...
};

// Merges the PASS variants of each selected target of `run` (every axis point of it) into its
// expectations file, one update per target. A stored configuration at the same mode, clock and axes
// keeps its other variants; a point the file does not hold yet becomes a new configuration (the note
// says so); other stored configurations are kept as they are, except those stored before one of the
// target's key axes existed: when the run's results name their key axes (TargetResult::key_axes), a stored
// configuration lacking one of them is dropped, with a note. Runs written before key_axes prune nothing, and
// an omit_at_default axis is never a key axis (configurations without it hold its default). Variants that
// did not PASS keep their stored entry; an update that writes nothing drops nothing. A corrupt or
// newer-schema file is never overwritten: its update reports the error.
std::vector<ExpectationUpdate> update_expectations(const LoadedRun& run,
                                                   const std::string& chapters_dir,
                                                   const std::vector<std::string>& selectors = {});

// The expectation of one measured variant, as --update-expectations would store it.
VariantExpectation expectation_of(const LoadedRun& run, const TargetResult& t,
                                  const VariantResult& v);

} // namespace aisp
