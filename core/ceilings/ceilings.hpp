// This machine's ceilings as plain data: what `aisp hw peaks` measured (docs/ceilings.md), the cache file
// that keeps them per GPU UUID and driver, and the datasheet values shown beside them (never instead).
// Pure C++: the probes that fill a CeilingSet live in device/probes*.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/gpu_snapshot.hpp"
#include "core/base/instrumentation.hpp"

namespace aisp {

// 2 added the provenance block (CeilingProvenance). Version 1 files are still read: a set without a
// provenance block is written back in the version-1 shape, so a results.json that carries one keeps it.
inline constexpr int k_peaks_schema_version = 2;
inline constexpr const char* k_peaks_schema_name = "aisp.peaks";

// Units a ceiling can have. Bandwidths count bytes as 1e9 per GB; rates 1e12 FLOP per TFLOP.
inline constexpr std::string_view k_unit_gb_s = "GB/s";
inline constexpr std::string_view k_unit_tflop_s = "TFLOP/s";
inline constexpr std::string_view k_unit_us = "us";

// One measured ceiling (or one that could not be measured here, with the reason).
struct CeilingEntry {
  std::string name;      // "dram_copy", "tensor_bf16", "p2p_0_to_1_peer", ... (see ceiling_label)
  std::string group;     // dram, l2, smem, compute, tensor, host, disk, p2p, launch
  std::string unit;      // GB/s, TFLOP/s or us
  double value = 0;      // median of the probe's samples; 0 when skipped
  std::string method;    // how: "cuBLASLt GEMM 8192x8192x8192 ..." (the winning method when several ran)
  std::string note;      // other methods' values, caveats
  std::string skipped;   // non-empty: not measurable on this machine, and why
  std::size_t samples = 0;
  std::string measured_utc;

  bool measured() const { return skipped.empty() && value > 0; }
};

// How a cached set was measured (schema 2): written by the `hw peaks` pass that last wrote the file.
// Every entry carries its own method, sample count and time; this is what holds for the whole file.
struct CeilingProvenance {
  std::string git_dirty;    // build_info::git_dirty of the aisp that wrote it (the SHA is CeilingSet's)
  std::string build_type;
  std::string written_utc;
  bool tool_free = false;   // no instrumentation tool detected (core/base/instrumentation.hpp); always true
                            // in a cache aisp wrote, since nothing is written under one
  std::string tools_checked;  // what was looked for
  std::string datasheet_rule;  // the plausibility rule the values passed
  std::optional<GpuTelemetry> gpu_state;  // NVML, sampled right after the last probe (absent without NVML)
  // Values that pass measured and were not cached, with the one-line reason (implausible_ceiling,
  // decide_cacheable). Tells `bench run` why a ceiling it asked for is still missing.
  std::vector<std::pair<std::string, std::string>> refused;
  // Entries carried over from a version-1 cache, measured before anything was checked for tools.
  std::vector<std::string> unconfirmed;
};

// Everything cached for one GPU: the ceilings and the identity they belong to.
struct CeilingSet {
  std::string gpu_name;
  std::string gpu_uuid;        // "GPU-xxxxxxxx-..."
  std::string driver_version;  // NVML's "580.159.04", or "cuda-13000" when NVML is absent
  std::string hardware_key;    // "h100_sxm"
  int cc = 0;                  // 90
  int sm_count = 0;
  std::int64_t l2_bytes = 0;   // decides when the L2 ceiling applies to `hot` results
  std::string aisp_git_sha;
  std::vector<CeilingEntry> entries;  // in probe order
  std::optional<CeilingProvenance> provenance;  // absent in a version-1 document

  const CeilingEntry* find(std::string_view name) const;
  // The value of a ceiling that was measured; nullopt when absent or skipped.
  std::optional<double> value(std::string_view name) const;
  // Replaces the entry of the same name, or appends.
  void upsert(CeilingEntry c);
};

nlohmann::ordered_json to_json(const CeilingEntry& c);
CeilingEntry ceiling_entry_from_json(const nlohmann::json& j);    // throws DataError
nlohmann::ordered_json to_json(const CeilingSet& s);
CeilingSet ceiling_set_from_json(const nlohmann::json& j);  // throws DataError, checks every entry

// A human label for a ceiling name ("dram_copy" -> "DRAM copy (read + write)"); the name itself if unknown.
std::string ceiling_label(std::string_view name);

// Probe groups, in the order `hw peaks` runs them.
const std::vector<std::string>& ceiling_groups();
// The ceiling names a full measurement of `groups` produces on a machine where `device` is one of
// `device_count` visible GPUs (GPU<->GPU pairs involve `device`; one GPU gives a single skipped "p2p").
// Throws UsageError for an unknown group.
std::vector<std::string> expected_ceilings(const std::vector<std::string>& groups, int device,
                                           int device_count);
// The groups placement needs (what `bench run` makes sure of before it runs anything): every group a
// ladder's Work can name, shared memory included (ch07:bank_conflicts places against smem_read).
std::vector<std::string> placement_groups();
// Groups placed when `aisp hw peaks` has cached them but never measured by `bench run` itself: the disk
// probe writes a 1 GiB file, which a run of kernels should not do unasked (ch05 says to run
// `aisp hw peaks --only disk` first).
std::vector<std::string> placement_groups_if_cached();
// "p2p_1_to_0_peer" / "p2p_1_to_0_staged"
std::string p2p_ceiling_name(int from, int to, bool peer);

// ---- the cache file ------------------------------------------------------------------------------
// artifacts/peaks/<uuid>_<driver>.json; characters outside [A-Za-z0-9._-] become '-'.
std::string peaks_cache_path(const std::string& dir, std::string_view uuid, std::string_view driver);

struct CacheLoad {
  enum class Status { missing, ok, corrupt };
  Status status = Status::missing;
  std::optional<CeilingSet> set;
  std::string problem;  // for corrupt: what is wrong, in one line
};

// Reads and checks a cache file. A file that does not parse, has another schema, a newer version, bad
// entries, belongs to another GPU UUID or driver, says it was measured under an instrumentation tool,
// or holds a value under half its datasheet value (implausible_ceiling: a cache an older aisp wrote
// under compute-sanitizer) is `corrupt`: never trusted.
CacheLoad load_ceiling_cache(const std::string& path, std::string_view expect_uuid,
                             std::string_view expect_driver);

// Writes atomically (temporary file in the same folder, then rename); creates the folder. Throws
// std::runtime_error when it cannot, and when the set holds what load_ceiling_cache would refuse (an
// implausible value, a provenance that is not tool-free): nothing untrustworthy reaches the disk.
void save_ceiling_cache(const std::string& path, const CeilingSet& set);

// Moves a corrupt cache aside to "<path>.corrupt" (replacing an older one) so that it is never silently
// overwritten; returns the new name, or "" when it could not be moved.
std::string quarantine_ceiling_cache(const std::string& path);

// ---- datasheet -----------------------------------------------------------------------------------
// Vendor datasheet values for a few GPU models, dense (no sparsity), at boost clock. Shown beside the
// measured ceilings and used as an upper bound for compute rates in the physics check, never as a
// substitute for a measurement.
struct Datasheet {
  std::string model;   // "H100 SXM"
  std::string source;  // where the numbers come from
  std::vector<std::pair<std::string, double>> values;  // ceiling name -> value in the ceiling's unit
  int sm_count = 0;    // the whole GPU's SMs: a device with fewer is a MIG slice or otherwise partial

  std::optional<double> value(std::string_view name) const;
};

// By GPU name as the driver reports it ("NVIDIA H100 80GB HBM3" -> H100 SXM); nullopt when unknown.
std::optional<Datasheet> datasheet_for(std::string_view gpu_name);

// ---- plausibility: what may be believed and cached ------------------------------------------------
// A measured value under this fraction of its datasheet value is refused.
inline constexpr double k_min_datasheet_fraction = 0.5;

// The datasheet value that can vouch for `c` on the GPU `set` describes, or nullopt where none can: the
// model is not in the table; the device has fewer SMs than the whole GPU (a MIG slice has its share of
// the bandwidth and compute, not the datasheet's); or `c` is not one of the GPU's own ceilings. Only
// DRAM, FMA and tensor rates qualify: the host link's speed is the slot's and the platform's (a Gen4
// slot halves it), not a property of the GPU.
std::optional<double> datasheet_check_value(const CeilingSet& set, const CeilingEntry& c);

// One line when a measured `c` is under k_min_datasheet_fraction of its datasheet value: "dram_read =
// 181 GB/s is 5.4% of the H100 SXM datasheet's 3350 GB/s (under 50%): ..."; nullopt otherwise.
std::optional<std::string> implausible_ceiling(const CeilingSet& set, const CeilingEntry& c);

// What one measuring pass may add to the cache. `set` gives the GPU (name, SM count); `fresh` are the
// entries the pass produced in one process; `tool` is what detect_instrumentation found in that
// process. Rules, in order:
//   1. under a tool nothing is kept: every entry is refused with instrumentation_refusal's reason;
//   2. a value under half its datasheet value is refused (implausible_ceiling);
//   3. if any value was refused by 2, the values measured beside it that no datasheet value can check
//      (L2, shared memory, launch, host) are refused too: whatever made one number implausible may
//      have touched them, and nothing can show it did not. Values that passed their datasheet check and
//      skipped entries (a fact, "one GPU visible", not a speed) are kept.
struct CacheDecision {
  std::vector<CeilingEntry> keep;
  std::vector<std::pair<std::string, std::string>> refused;  // name -> one-line reason
};
CacheDecision decide_cacheable(const CeilingSet& set, const std::vector<CeilingEntry>& fresh,
                               const std::optional<Instrumentation>& tool);

// The reasons of `refused` as one line ("a; b; and 3 more"), for the bench run's ceilings problem.
std::string refusal_summary(const std::vector<std::pair<std::string, std::string>>& refused);

// Where one result sits against the ceilings (core/results/roofline.cpp fills it; results.json keeps it per
// variant as "roofline").
struct RooflinePlacement {
  std::string bound;          // "memory" or "compute": the larger of the two floors
  std::string ceiling;        // the ceiling the result is placed against ("dram_copy", "tensor_bf16")
  std::string unit;           // that ceiling's unit (GB/s or TFLOP/s)
  double ceiling_value = 0;
  double achieved = 0;        // this result in the same unit
  double percent = 0;         // 100 * achieved / ceiling_value
  double intensity = 0;       // declared FLOPs per declared byte (0 when either is 0)
  double floor_ms = 0;        // time at the ceilings: max(bytes / memory ceiling, FLOPs / compute ceiling)
  std::string physics;        // "ok", "implausible", or "not checked: <why>"
  double physics_floor_ms = 0;  // the floor the physics check compared the median with (0 = not checked)
};

nlohmann::ordered_json to_json(const RooflinePlacement& p);
RooflinePlacement placement_from_json(const nlohmann::json& j);  // throws DataError

// ---- `aisp hw peaks` output -------------------------------------------------------------------------
struct PeaksReport {
  CeilingSet set;
  std::string path;        // the cache file
  std::string cache_note;  // "reused", "measured now", what was wrong with the old file, ...
  std::vector<std::string> measured;                        // names measured by this call
  std::vector<std::pair<std::string, std::string>> errors;  // name -> why it has no number
};

// One row per ceiling: measured value, the datasheet value beside it (when the model is known) and
// measured/datasheet, the method; errors last.
std::string render_peaks_table(const PeaksReport& r);
nlohmann::ordered_json peaks_report_json(const PeaksReport& r);

// What a `bench run` placed its results against: the ceilings used, where they came from, or why there
// were none. Recorded in results.json (RunResults::ceilings).
struct RunCeilings {
  std::string source;   // the cache file
  std::string problem;  // empty when the ceilings were available; else why not (then `set` is empty)
  CeilingSet set;       // only the entries placement can use
};

nlohmann::ordered_json to_json(const RunCeilings& r);
RunCeilings run_ceilings_from_json(const nlohmann::json& j);

}  // namespace aisp
