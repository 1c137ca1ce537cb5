// The catalogue of targets (ladders) and their variants, and the selectors that pick them.
// Pure metadata: the device layer attaches the code that runs (device/ladder.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/axes.hpp"

namespace aisp {

enum class VariantKind { baseline, step, optimized, vendor };
std::string_view to_string(VariantKind k);

// Which clock a target is timed with (docs/measurement.md "Two clocks").
enum class ClockKind { gpu, wall };
std::string_view to_string(ClockKind c);

// L2 state for each sample: flushed (cold) or left warm by back-to-back launches (hot).
enum class CacheMode { cold, hot };
std::string_view to_string(CacheMode m);

// How a cold sample evicts the L2 (docs/measurement-methods.md "The cold-L2 flush"): by reading twice
// the L2 (the default: it leaves clean lines) or by writing it (until 2026-11: its dirty lines were
// written back inside the next timed interval). AISP_L2_FLUSH=write selects the old flush, to compare.
enum class L2Flush { read, write };
std::string_view to_string(L2Flush f);
// AISP_L2_FLUSH ("read", "write" or unset = read); UsageError naming the variable for anything else.
L2Flush l2_flush_from_env();

struct VariantInfo {
  int step = 0;           // 1, 2, ... for numbered steps; 0 for vendor references
  std::string slug;       // "coalesced", or "cublas" for vendor_cublas
  VariantKind kind = VariantKind::step;
  std::string summary;    // one line
  int min_cc = 0;         // minimum compute capability as major*10+minor, 0 = any
  std::vector<std::string> features;  // e.g. {"sm_90a"}, {"multi_gpu"}; "peer_gpu": also works on the next GPU
  std::string precision;  // declared precision when it differs from the ladder's (e.g. "bf16"); empty = same

  // "01_chunked" or "vendor_memcpy": the file stem and the last part of the selector.
  std::string file_stem() const;
};

struct TargetInfo {
  std::string chapter;   // "ch07"
  std::string ladder;    // "copy"
  std::string summary;   // one line
  std::vector<AxisSpec> axes;
  ClockKind clock = ClockKind::gpu;
  CacheMode default_mode = CacheMode::cold;
  bool hidden = false;   // test-only ladders (selftest, cheats): shown only when asked
  // Per-variant sampling budget (seconds) a run uses when no --max-time was given, where it is larger than
  // the default: a ladder whose samples last a second or scatter by +-10% (a disk, a pageable copy, a
  // host-bound loop) whose median the default budget cannot narrow to 3%. 0: the run's budget.
  double sampling_budget_s = 0;
  std::vector<VariantInfo> variants;  // sorted: numbered steps by step, then vendor references by slug

  std::string name() const { return chapter + ":" + ladder; }  // "ch07:copy"
  std::string variant_name(const VariantInfo& v) const { return name() + ":" + v.file_stem(); }
};

// A selection: the targets picked, each with the variants picked (all of them for "chNN" and "chNN:ladder").
struct Selection {
  struct Item {
    const TargetInfo* target;
    std::vector<const VariantInfo*> variants;
  };
  std::vector<Item> items;
};

// Resolves selectors ("ch07", "ch07:copy", "ch07:copy:03_vectorized"; each may also be a comma-separated
// list). Hidden targets match only when named by chapter or target explicitly and include_hidden is set,
// or when include_hidden is set for a chapter selector. An empty selector list selects every visible target.
// Throws UsageError for a selector that matches nothing, naming up to three close matches.
Selection select(const std::vector<TargetInfo>& catalogue, const std::vector<std::string>& selectors,
                 bool include_hidden = false);

// Up to `limit` names from `candidates` closest to `wanted` by edit distance (for "did you mean").
std::vector<std::string> close_matches(std::string_view wanted,
                                       const std::vector<std::string>& candidates,
                                       std::size_t limit = 3);

}  // namespace aisp
