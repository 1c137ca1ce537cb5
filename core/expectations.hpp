// Expectations: what each variant of a ladder is expected to measure on one kind of hardware,
// stored next to the ladder as chapters/chNN_*/<ladder>/expectations_<hardware key>.json. Written
// only by `aisp bench run --update-expectations`, read by `aisp bench check` and `aisp report
// --update-readme`. Format, verdicts and thresholds: docs/regression-gating.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/axes.hpp"
#include "core/run_folder.hpp"

namespace aisp {

inline constexpr int k_expectations_schema_version = 1;
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
  ExpectationProvenance provenance;
};

struct Expectations {
  int schema_version = k_expectations_schema_version;
  std::string target; // "ch07:copy"
  std::string hardware_key;
  std::string mode; // the configuration every entry was measured in
  std::string clock;
  AxisValues axes;
  std::vector<VariantExpectation> variants; // sorted by name

  const VariantExpectation* find(const std::string& variant) const;
};

// Stable key order; numbers rounded to 6 significant digits so that a re-measurement diffs as a few
// changed digits; variants sorted by name (which is ladder order: "01_..." < "02_..." <
// "vendor_...").
std::string expectations_to_text(const Expectations& e);
// Throws DataError naming `origin` for invalid JSON, another document, a newer schema or missing
// fields.
Expectations expectations_from_text(const std::string& text, const std::string& origin);

// The one folder of target "chNN:ladder": the unique chapters_dir/chNN_*/ladder/. Throws UsageError
// when there is none or more than one.
std::string ladder_folder(const std::string& chapters_dir, const std::string& target);
std::string expectations_path(const std::string& chapters_dir, const std::string& target,
                              const std::string& hardware_key);

// nullopt when the file does not exist; DataError when it cannot be trusted.
std::optional<Expectations> read_expectations(const std::string& path);
// Every expectations_*.json of a ladder folder, sorted by hardware key; DataError for one that is
// corrupt.
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

// Merges the PASS variants of each selected target of `run` into its expectations file. A stored
// file for the same mode, clock and axes keeps its other variants; a stored file for another
// configuration is replaced (and the note says so). Variants that did not PASS keep their stored
// entry. A corrupt or newer-schema file is never overwritten: its update reports the error instead.
std::vector<ExpectationUpdate> update_expectations(const LoadedRun& run,
                                                   const std::string& chapters_dir,
                                                   const std::vector<std::string>& selectors = {});

// The expectation of one measured variant, as --update-expectations would store it.
VariantExpectation expectation_of(const LoadedRun& run, const TargetResult& t,
                                  const VariantResult& v);

} // namespace aisp
