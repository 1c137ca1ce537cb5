// Named integer axes of a ladder (sizes, counts), settable from the CLI as --axis NAME=VALUE.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aisp {

struct AxisSpec {
  std::string name;           // e.g. "n"
  std::int64_t default_value;  // used when the CLI does not set it
  std::string help;           // one line: what the axis means, with its unit
  std::int64_t min_value = 1;  // values below are a usage error
  // The value the GPU correctness tests run the target at (a small size, the tiny model); none: the
  // default. Any value counts, 0 included (a model axis' 0 is the tiny model): test_axes().
  std::optional<std::int64_t> test_value = std::nullopt;
  // When not empty and the CLI does not set this axis, a run measures the target at every value here
  // (in this order) instead of at default_value alone: e.g. {4096, 8192} for a GEMM's size, or the block
  // sizes 64..1024 of an occupancy sweep. `--axis NAME=V` picks one value; `--axis NAME=V1,V2` sweeps.
  std::vector<std::int64_t> default_sweep = {};
  // For an axis added to a ladder after results were stored: at its default value it is left out of a
  // result's axes (the configuration key of the expectations files, the tables' headers), so that the
  // configurations stored before it existed keep matching; at any other value it is in the key like any
  // axis. The worker still receives it (the problem's allocate() reads every axis): only what is recorded
  // drops it (recorded_axes). A recorded axes map that lacks it means its default.
  bool omit_at_default = false;
};

// The resolved values of a target's axes (every spec has an entry; what a result records may lack an
// omit_at_default axis at its default: recorded_axes).
using AxisValues = std::map<std::string, std::int64_t, std::less<>>;

// Parses an integer axis value. Accepted forms (no spaces): decimal "268435456", hexadecimal "0x1000",
// shifts "1<<28", powers "2^28", products "3*1024", and binary suffixes "256Ki", "64Mi", "4Gi" (also on
// the left of a product or shift: "3Gi", "16*1Mi"). Throws UsageError naming the text on anything else,
// including overflow of int64 and negative results.
std::int64_t parse_axis_value(std::string_view text);

// Splits "NAME=VALUE" (throws UsageError when there is no '=' or the name is empty) and parses VALUE.
std::pair<std::string, std::int64_t> parse_axis_assignment(std::string_view text);

// Applies overrides to the specs' defaults. An override naming an axis the target does not have, or a value
// under the axis' minimum, throws UsageError listing the target's axes.
AxisValues resolve_axes(const std::vector<AxisSpec>& specs,
                        const std::vector<std::pair<std::string, std::int64_t>>& overrides,
                        std::string_view target_name);

// The values the GPU correctness tests run a target at: each axis' test_value where it has one, else its
// default.
AxisValues test_axes(const std::vector<AxisSpec>& specs);

// An axis and the values to measure it at, in order: one value picks it, several sweep it.
using AxisRequest = std::pair<std::string, std::vector<std::int64_t>>;

// Splits "NAME=V1,V2,..." (also plain "NAME=V") and parses each value as parse_axis_value does. Throws
// UsageError for an empty name, an empty value ("n=1,,2", "n=") or a value given twice.
AxisRequest parse_axis_sweep(std::string_view text);

// The most points one target may be measured at in one run (the product of its swept axes' lengths).
inline constexpr std::size_t k_max_axis_points = 64;

// Every point a target is measured at: per axis, the requested values when the CLI names the axis (a
// later request for the same axis wins), else its default_sweep when set, else its default_value; then
// the cartesian product, in spec order with the last axis varying fastest. Throws UsageError as
// resolve_axes does (unknown axis, value under the minimum) and when there are more than `cap` points.
std::vector<AxisValues> expand_axis_points(const std::vector<AxisSpec>& specs, const std::vector<AxisRequest>& requests,
                                           std::string_view target_name, std::size_t cap = k_max_axis_points);

// What a result records of a point's `values` (TargetResult::axes, the configuration key): every value,
// less those of omit_at_default axes at their default. Values of names without a spec are kept.
AxisValues recorded_axes(const std::vector<AxisSpec>& specs, const AxisValues& values);

// The names of the axes that are always in a result's key (those without omit_at_default), in spec order.
std::vector<std::string> key_axis_names(const std::vector<AxisSpec>& specs);

// "n=1024, m=8" (in name order; "" when there are no axes).
std::string format_axes(const AxisValues& axes, std::string_view separator = ", ");

// "size=4096,8192" for a spec with a default sweep, else "size=4096": what a run uses when not told.
std::string format_axis_default(const AxisSpec& spec);

}  // namespace aisp
