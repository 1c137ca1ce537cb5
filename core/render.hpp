// Rendering of run results for people (table, markdown) and for tools (csv, json).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/registry.hpp"
#include "core/results.hpp"

namespace aisp {

enum class OutputFormat { table, json, markdown, csv };
std::optional<OutputFormat> output_format_from_string(std::string_view s);

std::string render_results(const RunResults& r, OutputFormat f);

// `bench list-targets`: targets with their variants, kinds and summaries.
std::string render_catalogue(const std::vector<const TargetInfo*>& targets, OutputFormat f);

// Human-friendly durations ("812 ns", "3.41 us", "2.904 ms", "1.20 s") and ratios ("3.92x").
std::string format_duration_ms(double ms);

}  // namespace aisp
