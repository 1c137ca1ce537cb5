// A stored run, read back: results.json (schema v1) and the provenance in manifest.json. The
// gating, history and report code all read runs through LoadedRun, so they never disagree on what a
// field means.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/results/results.hpp"

namespace aisp {

// Where a measurement came from (manifest.json). Fields the manifest lacks stay empty / 0.
struct RunProvenance {
  std::string run_id;
  std::string created_utc;
  std::string hardware_key;
  std::string device_name;
  std::string gpu_uuid;
  std::string git_sha;
  std::string git_dirty; // "true", "false" or "unknown", as the build recorded it
  std::string build_type;
  std::string hostname;
  std::string clocks_policy;
  int driver_version = 0; // CUDA driver API version, e.g. 13000
  int runtime_version = 0;
};

struct LoadedRun {
  std::string dir; // the run folder
  RunResults results;
  RunProvenance provenance;
  nlohmann::json manifest; // null when the folder has no manifest.json
};

// Percent of the measured ceiling a variant was placed against (VariantResult::roofline), when it
// was.
std::optional<double> percent_of_ceiling(const VariantResult& v);

// `path` is a run folder or a results.json. Throws UsageError when it does not exist or holds no
// results, DataError when results.json or manifest.json is corrupt or of a newer schema.
LoadedRun load_run(const std::string& path);

// From the text of results.json and manifest.json (empty manifest = none); `dir` is recorded as
// given.
LoadedRun load_run_from_text(const std::string& results_text, const std::string& manifest_text,
                             const std::string& dir);

RunProvenance provenance_from_manifest(const nlohmann::json& manifest);

// True when `name` (a target "ch07:copy" or variant "ch07:copy:03_vectorized") is picked by any
// selector
// ("ch07", "ch07:copy", "ch07:copy:03_vectorized", each may be comma-separated). No selector picks
// all. A target name is picked by a variant selector of that target too.
bool selector_matches(std::string_view name, const std::vector<std::string>& selectors);
std::vector<std::string> split_selectors(const std::vector<std::string>& selectors);

// Writes `text` to a temporary file beside `path`, flushes it to disk and renames it over `path`,
// so that readers see the old or the new file, never half of one. Throws std::runtime_error naming
// the path.
void write_file_atomically(const std::string& path, const std::string& text);

// The current UTC time through strftime's `format` ("%Y%m%dT%H%M%SZ" for run folder names).
std::string utc_now(const char* format);

// A selector or label made safe for a folder name: [A-Za-z0-9._-], at most 60 characters, "all" if empty.
std::string sanitize_label(std::string s);

// The whole file; throws std::runtime_error when it cannot be read.
std::string read_text_file(const std::string& path);

} // namespace aisp
