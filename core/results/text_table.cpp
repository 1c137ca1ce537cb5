#include "core/results/text_table.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace aisp {

std::string markdown_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string csv_escape(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos)
    return std::string(s);
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string render_text_table(const TextTable& t, OutputFormat f) {
  std::string out;
  if (f == OutputFormat::csv) {
    const auto line = [&](const std::vector<std::string>& cells) {
      for (std::size_t i = 0; i < cells.size(); ++i)
        out += (i ? "," : "") + csv_escape(cells[i]);
      out += "\n";
    };
    line(t.header);
    for (const auto& r : t.rows)
      line(r);
    return out;
  }
  if (f == OutputFormat::markdown) {
    const auto line = [&](const std::vector<std::string>& cells) {
      out += "|";
      for (const auto& c : cells)
        out += " " + markdown_escape(c) + " |";
      out += "\n";
    };
    line(t.header);
    out += "|";
    for (std::size_t i = 0; i < t.header.size(); ++i)
      out += " --- |";
    out += "\n";
    for (const auto& r : t.rows)
      line(r);
    return out;
  }
  if (f != OutputFormat::table)
    throw std::invalid_argument("render_text_table: json is rendered by the caller");
  std::vector<std::size_t> width(t.header.size(), 0);
  const auto measure = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], cells[i].size());
  };
  measure(t.header);
  for (const auto& r : t.rows)
    measure(r);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      l += i + 1 == cells.size() ? cells[i] : fmt::format("{:<{}}  ", cells[i], width[i]);
    }
    while (!l.empty() && l.back() == ' ')
      l.pop_back();
    out += l + "\n";
  };
  line(t.header);
  for (const auto& r : t.rows)
    line(r);
  return out;
}

} // namespace aisp
