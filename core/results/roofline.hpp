// Roofline placement and the physics check (docs/measurement.md "Declared work, ceilings and the physics
// check"; docs/ceilings.md): where each result sits against this machine's measured ceilings, whether it
// is faster than the hardware allows, and the roofline table and SVG of a run. Pure functions of plain
// structs, so that they are unit-tested without a GPU and the HTML report can embed the SVG.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ceilings/ceilings.hpp"
#include "core/base/registry.hpp"
#include "core/results/results.hpp"

namespace aisp {

// A `cold` result more than this fraction under its physics floor is IMPLAUSIBLE.
inline constexpr double k_physics_tolerance = 0.03;

// The declared work of one launch of one variant, as placement needs it.
struct WorkDecl {
  double bytes = 0;          // minimum DRAM bytes (or bytes over `memory_ceiling`)
  double bytes_read = 0;     // optional split of `bytes`; 0 and 0 = undeclared (treated as a copy mix)
  double bytes_written = 0;
  double flops = 0;
  std::string flop_dtype;      // "fp32" (default when FLOPs are declared without one), "fp64", "tf32", ...
  std::string memory_ceiling;  // explicit ceiling for the bytes (e.g. a GPU<->GPU link); "" = DRAM/L2
};

// The target's declaration, with a variant's declared precision change (e.g. "tf32") taking over the
// FLOPs' dtype.
WorkDecl work_of(const TargetResult& t, const VariantResult& v);

// Which DRAM ceiling a read/write mix is placed against: mostly reads (writes under a quarter of the
// bytes) -> dram_read, mostly writes -> dram_write, otherwise (and when undeclared) -> dram_copy.
std::string_view dram_ceiling_for(double bytes_read, double bytes_written);

// The compute ceiling for a FLOP dtype: fp32 -> fp32_fma, fp64 -> fp64_fma, tf32/bf16/fp16 ->
// tensor_*, fp8 (also "fp8_e4m3", "e4m3") -> tensor_fp8. nullopt for an unknown dtype.
std::optional<std::string> compute_ceiling_for(std::string_view dtype);

struct PlaceOutcome {
  std::optional<RooflinePlacement> placement;
  std::string why_not;  // when there is no placement: which ceiling is missing, or "no declared work"
  std::string implausible_reason;  // non-empty when the physics check failed: the numbers that disagree
};

// Places one result (median in ms) against `ceilings`. `datasheet` (may be null) raises the compute
// rates the physics check uses to the datasheet peak where that is higher: a library GEMM is a measured
// ceiling for "% of", not a hardware limit, and a hand-written kernel may beat it.
PlaceOutcome place(const WorkDecl& work, CacheMode mode, double median_ms, const CeilingSet& ceilings,
                   const Datasheet* datasheet);

// Places every PASS or NOISY variant of `t` (statistics must be derived), turns those the physics check
// rejects into IMPLAUSIBLE with the reason, and re-derives the comparisons so that speedups stay between
// PASS variants. Returns the names of the variants it made IMPLAUSIBLE. Does nothing when the ceilings
// are unavailable (c.problem set).
std::vector<std::string> apply_ceilings(TargetResult& t, const RunCeilings& c);

// ---- the roofline of a run (aisp tools roofline) -------------------------------------------------
// In their own namespace: the HTML report has chart structs of its own (core/report/report_charts.hpp).
namespace roofline {

struct Roof {
  std::string name;   // ceiling name
  std::string label;  // "DRAM copy (read + write)"
  double value = 0;   // GB/s for memory roofs, TFLOP/s for compute roofs
  bool memory = true;
};

struct Point {
  std::string label;        // "ch07:copy:04_in_flight"
  std::string verdict;      // "PASS", "IMPLAUSIBLE", ...
  double intensity = 0;     // FLOP/byte; 0 = no FLOPs declared (drawn at the left edge)
  double tflop_per_s = 0;
  double gb_per_s = 0;
  std::string bound;        // "memory" / "compute"
  std::string ceiling;      // ceiling name
  double percent = 0;       // % of that ceiling
};

struct Chart {
  std::string title;
  std::vector<Roof> roofs;
  std::vector<Point> points;
};

// Roofs from the run's ceilings; one point per placed variant.
Chart chart_of(const RunResults& r);

// A self-contained SVG (log-log: FLOP/byte against TFLOP/s): the measured roofs, one labelled point per
// variant. Variants that declare no FLOPs are drawn hollow at the left edge, at the height that keeps
// their distance below the memory roof equal to their fraction of it.
std::string render_svg(const Chart& chart, int width = 960, int height = 600);

}  // namespace roofline

// The text table of `tools roofline`: variant, arithmetic intensity, achieved rate, bound, % of it.
std::string render_roofline_table(const RunResults& r);

}  // namespace aisp
