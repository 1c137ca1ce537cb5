// Rendering of run results for people (table, markdown) and for tools (csv, json).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/registry.hpp"
#include "core/results/results.hpp"

namespace aisp {

enum class OutputFormat { table, json, markdown, csv };
std::optional<OutputFormat> output_format_from_string(std::string_view s);

std::string render_results(const RunResults& r, OutputFormat f);

// `bench list-targets`: targets with their variants, kinds and summaries.
std::string render_catalogue(const std::vector<const TargetInfo*>& targets, OutputFormat f);

// A variant's facts in one short cell: "regs 64 · occ 75% · 4 blk/SM" (known names get short labels and
// a fixed order, zero spills and zero shared memory are left out, others follow as "name value"); "" when
// there are none.
std::string format_facts(const std::vector<std::pair<std::string, std::string>>& facts);

// True when any variant of the target reported facts (its tables then get a facts column).
bool has_facts(const TargetResult& t);

// Human-friendly durations ("812 ns", "3.41 us", "2.904 ms", "1.20 s") and ratios ("3.92x").
std::string format_duration_ms(double ms);

}  // namespace aisp
