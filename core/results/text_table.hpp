// A plain table rendered for people (aligned text), for READMEs (GitHub markdown) or for tools
// (CSV). JSON output stays with each command: its records carry numbers, not the formatted cells
// shown here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/results/render.hpp"

namespace aisp {

struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows; // each row has header.size() cells
};

// `f` is table, markdown or csv; json is rejected with std::invalid_argument (a caller bug).
std::string render_text_table(const TextTable& t, OutputFormat f);

std::string markdown_escape(std::string_view s); // '|' and newlines, so a cell stays one cell
std::string csv_escape(std::string_view s);      // RFC 4180 quoting when needed
std::string html_escape(std::string_view s);     // & < > " '

} // namespace aisp
