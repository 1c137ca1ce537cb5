// Named integer axes of a ladder (sizes, counts), settable from the CLI as --axis NAME=VALUE.
#pragma once

#include <cstdint>
#include <map>
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
  std::int64_t test_value = 0; // small value for the GPU correctness tests (0 = use the default)
};

// The resolved values of a target's axes (every spec has an entry).
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

}  // namespace aisp
