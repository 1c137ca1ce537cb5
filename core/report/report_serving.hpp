// The "Serving load tests" section of the reports: `aisp loadgen --out` files (schema
// aisp.loadgen/1, docs/serving.md) as a table per file, one row per run, with the columns of
// scripts/serving_report.py, and, for a file of two or more runs (a rate sweep), the
// latency-throughput curve drawn with the sweep chart of core/report/report_sweep.hpp. core/ reads
// the JSON itself: it cannot depend on serving/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/report/report_sweep.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

inline constexpr const char* k_loadgen_schema = "aisp.loadgen/1";

// One run of a loadgen file: one offered load and what it measured. Latencies in ms; a field the
// file leaves out or null stays empty (shown as "-").
struct LoadgenRun {
  std::optional<double> rate; // requests/s; empty: unlimited ("inf", every request at once)
  int max_concurrency = 0;    // 0: unlimited
  int requests = 0, completed = 0;
  double request_throughput = 0; // req/s
  double output_throughput = 0;  // output tokens/s
  std::optional<double> ttft_p50, ttft_p99, tpot_p50, tpot_p99, itl_p99, e2el_p50;
  std::optional<double> goodput;         // req/s within the SLO; empty without an SLO
  std::optional<double> server_overhead; // fraction of server busy time outside the runner
};

struct LoadgenFile {
  std::string path;
  std::string model, url;
  int num_prompts = 0, input_len = 0, output_len = 0;
  std::string dataset;  // "" for random prompts
  std::string slo_text; // "ttft <= 2000 ms, tpot <= 100 ms", or "none"
  std::vector<LoadgenRun> runs;
};

// True when `text` is a JSON object whose "schema" is aisp.loadgen/1 (false for anything else,
// invalid JSON included).
bool is_loadgen_text(const std::string& text);

// What a positional argument of `aisp report` is: a run (a folder, a results.json, a file of schema
// aisp.results, or a missing path: load_run explains those) or a loadgen file. Throws UsageError
// for any other file (another schema such as "aisp.compare", no schema, not JSON): neither a run
// nor a load test.
enum class ReportInput { run, loadgen };
ReportInput classify_report_input(const std::string& path);

// Parses a loadgen file's text; `path` names it in errors. Throws DataError when it is not JSON, of
// another schema, or lacks a field the table needs.
LoadgenFile loadgen_from_text(const std::string& text, const std::string& path);
LoadgenFile load_loadgen_file(const std::string& path);

// "rate 4/s", "concurrency 64", "rate 4/s, concurrency 64" or "rate inf": what a run offered.
std::string load_label(const LoadgenRun& r);

// One row per run, the columns of scripts/serving_report.py; "server overhead" only when some run
// of the file carries it.
TextTable serving_table(const LoadgenFile& f);

// The latency-throughput curve of a file (x = output tokens/s, y = ms; lines for TPOT p50, TPOT p99
// and TTFT p50; each point labelled by its load). Empty when fewer than two runs completed
// requests.
std::optional<SweepChart> serving_curve_of(const LoadgenFile& f);

// The <section id="serving"> of the HTML report ("" for no files) and the markdown section.
std::string render_serving_html(const std::vector<LoadgenFile>& files);
std::string render_serving_markdown(const std::vector<LoadgenFile>& files);

} // namespace aisp
