// Rendering of `aisp doctor` findings: a terminal table (what needs doing stands out), JSON (every
// field, for scripts and the run manifest) and Markdown (for an issue or a lab notebook).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "core/doctor/doctor.hpp"

namespace aisp::doctor {

namespace {

constexpr std::array<std::pair<Severity, std::string_view>, 5> k_severities{{
    {Severity::ok, "ok"},
    {Severity::info, "info"},
    {Severity::warn, "warn"},
    {Severity::fail, "fail"},
    {Severity::na, "n/a"},
}};

constexpr std::array<std::pair<Group, std::string_view>, 4> k_groups{{
    {Group::gpu, "gpu"},
    {Group::host, "host"},
    {Group::env, "env"},
    {Group::tools, "tools"},
}};

std::string_view group_title(Group g) {
  switch (g) {
    case Group::gpu:
      return "GPU";
    case Group::host:
      return "Host";
    case Group::env:
      return "Environment";
    case Group::tools:
      return "Tools";
  }
  return "?";
}

std::array<int, 5> count(std::span<const Finding> findings) {
  std::array<int, 5> n{};
  for (const auto& f : findings) ++n[static_cast<std::size_t>(f.severity)];
  return n;
}

std::string summary_line(std::span<const Finding> findings) {
  const auto n = count(findings);
  return fmt::format("aisp doctor: {} checks: {} ok, {} info, {} warn, {} fail, {} n/a",
                     findings.size(), n[0], n[1], n[2], n[3], n[4]);
}

std::string render_table(std::span<const Finding> findings) {
  std::size_t id_w = 5, subject_w = 7;
  for (const auto& f : findings) {
    id_w = std::max(id_w, f.id.size());
    subject_w = std::max(subject_w, std::min<std::size_t>(f.subject.size(), 36));
  }
  std::string out = summary_line(findings) + "\n";
  std::optional<Group> current;
  for (const auto& f : findings) {
    if (f.group != current) {
      current = f.group;
      out += fmt::format("\n{}\n", group_title(f.group));
    }
    std::string subject = f.subject;
    if (subject.size() > 36) subject = subject.substr(0, 35) + "~";
    out += fmt::format("  {:<5} {:<{}}  {:<{}}  {}\n", to_string(f.severity), f.id, id_w, subject,
                       subject_w, f.found);
    // What to do goes on its own line so that the found values stay in one readable column.
    const bool actionable = f.severity == Severity::warn || f.severity == Severity::fail;
    if (actionable || (f.severity == Severity::info && !f.fix.empty())) {
      std::string line = actionable ? "recommended: " + f.recommended : std::string();
      if (!f.fix.empty()) line += (line.empty() ? "" : "; ") + std::string("fix: ") + f.fix;
      out += fmt::format("  {:<5} {:<{}}  {}\n", "", "", id_w, line);
    }
  }
  const auto n = count(findings);
  if (n[static_cast<std::size_t>(Severity::fail)] > 0) {
    out +=
        "\nAt least one check failed: measurements on this machine are not trustworthy until it "
        "is fixed.\n";
  }
  return out;
}

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string render_markdown(std::span<const Finding> findings) {
  std::string out = "# " + summary_line(findings) + "\n";
  std::optional<Group> current;
  for (const auto& f : findings) {
    if (f.group != current) {
      current = f.group;
      out += fmt::format("\n## {}\n\n", group_title(f.group));
      out +=
          "| Status | Check | Subject | Found | Recommended | Fix | Source | Checklist section |\n";
      out += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    }
    out += fmt::format("| {} | `{}` | {} | {} | {} | {} | {} | {} |\n", to_string(f.severity), f.id,
                       md_cell(f.subject), md_cell(f.found), md_cell(f.recommended), md_cell(f.fix),
                       md_cell(f.source), md_cell(f.section));
  }
  return out;
}

std::string render_json(std::span<const Finding> findings) {
  const auto n = count(findings);
  nlohmann::ordered_json j;  // keeps the order written here: summary first, then findings
  j["schema_version"] = 1;
  j["tool"] = "aisp doctor";
  j["summary"] = {{"checks", findings.size()},
                  {"ok", n[0]},
                  {"info", n[1]},
                  {"warn", n[2]},
                  {"fail", n[3]},
                  {"n/a", n[4]}};
  j["exit_code"] = exit_code_for(findings);
  auto& arr = j["findings"] = nlohmann::ordered_json::array();
  for (const auto& f : findings) {
    arr.push_back({{"id", f.id},
                   {"group", to_string(f.group)},
                   {"subject", f.subject},
                   {"section", f.section},
                   {"source", f.source},
                   {"found", f.found},
                   {"recommended", f.recommended},
                   {"severity", to_string(f.severity)},
                   {"fix", f.fix}});
  }
  // Replace rather than throw on invalid UTF-8: a value read from /sys must not abort the report.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string_view to_string(Severity s) {
  for (const auto& [sev, name] : k_severities) {
    if (sev == s) return name;
  }
  return "n/a";
}

std::string_view to_string(Group g) {
  for (const auto& [grp, name] : k_groups) {
    if (grp == g) return name;
  }
  return "host";
}

std::optional<Group> group_from_string(std::string_view s) {
  for (const auto& [grp, name] : k_groups) {
    if (name == s) return grp;
  }
  return std::nullopt;
}

std::optional<Format> format_from_string(std::string_view s) {
  if (s == "table") return Format::table;
  if (s == "json") return Format::json;
  if (s == "markdown" || s == "md") return Format::markdown;
  return std::nullopt;
}

std::string render(std::span<const Finding> findings, Format format) {
  switch (format) {
    case Format::table:
      return render_table(findings);
    case Format::json:
      return render_json(findings);
    case Format::markdown:
      return render_markdown(findings);
  }
  return render_table(findings);
}

int exit_code_for(std::span<const Finding> findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::fail; })
             ? 1
             : 0;
}

}  // namespace aisp::doctor
