// Markdown reports: a run's report (for pull requests and notes) and the results tables that ladder
// READMEs carry between marker comments, generated from stored expectations (never typed by hand).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/results/expectations.hpp"
#include "core/report/report_serving.hpp"
#include "core/report/report_summary.hpp"
#include "core/results/run_folder.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

inline constexpr const char* k_readme_begin = "<!-- aisp:results:begin -->";
inline constexpr const char* k_readme_end = "<!-- aisp:results:end -->";

// "ch07:copy", or "ch07:copy n=1024" when `run` measured the target at several axis points: what
// names one point in headings, anchors and chart titles.
std::string point_title(const RunResults& run, const TargetResult& t);

// The per-variant table of one target, as the reports show it (cells already formatted).
TextTable report_table(const TargetResult& t);
// Facts about the run (date, hardware, versions, git, build, clocks, command) as label/value pairs.
std::vector<std::pair<std::string, std::string>> run_facts(const LoadedRun& run);
// "8 PASS, 1 FAIL" over one target's variants.
std::string verdict_counts(const TargetResult& t);
// "cold L2, gpu clock, n=1073741824; declared 8.59 GB and 0 GFLOP per launch"
std::string target_config(const TargetResult& t);

// The summary table (core/report/report_summary.hpp), then per ladder each point's table, then the
// tables of the loadgen files given (core/report/report_serving.hpp).
std::string render_markdown_report(const LoadedRun& run, const ReportOptions& options = {},
                                   const std::vector<LoadgenFile>& serving = {});
// The tables of loadgen files alone (no run folder).
std::string render_markdown_report(const std::vector<LoadgenFile>& serving);

// The README block of one ladder: a table per hardware key, each row with its provenance.
std::string render_expectations_markdown(const std::vector<Expectations>& stored);

// `text` with the lines between the begin and end markers replaced by `content`; nullopt when the
// markers are missing, repeated or out of order.
std::optional<std::string> replace_marked_section(const std::string& text,
                                                  const std::string& content);

struct ReadmeUpdate {
  std::string target; // "ch07:copy"
  std::string readme; // path
  bool written = false;
  std::string error; // non-empty: not updated, and why
};

// Regenerates the marked table of every ladder under chapters_dir that has stored expectations (or
// of the selected ones). A README is rewritten (atomically) only when its table changed.
std::vector<ReadmeUpdate> update_readmes(const std::string& chapters_dir,
                                         const std::vector<std::string>& selectors);

} // namespace aisp
