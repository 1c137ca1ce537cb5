// `aisp report`: a run's self-contained HTML page and markdown report (with the tables and curves of
// aisp loadgen files given beside the runs), and the results tables of ladder READMEs regenerated from
// stored expectations (docs/regression-gating.md "Reports").
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <vector>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/report/report_html.hpp"
#include "core/report/report_markdown.hpp"
#include "core/report/report_serving.hpp"
#include "core/report/report_summary.hpp"
#include "core/results/run_folder.hpp"
#include "core/measure/verdict.hpp"

namespace aisp::cli {

namespace fs = std::filesystem;

namespace {

struct ReportCli {
  std::vector<std::string> runs;
  std::string html;
  std::string markdown;
  bool update_readme = false;
  std::vector<std::string> targets;
  std::string chapters_dir;
};

// "-" is stdout; anything else is replaced atomically.
void emit(const std::string& path, const std::string& text, const char* what) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  try {
    write_file_atomically(path, text);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("cannot write the {} report: {}", what, e.what()));
  }
  std::fprintf(stderr, "aisp: %s report %s\n", what, path.c_str());
}

int report(const ReportCli& c) {
  if (c.runs.empty() && !c.update_readme)
    throw UsageError("give a RUN_DIR to report on, --update-readme, or both");
  int code = 0;
  // Loadgen files (schema aisp.loadgen/1) ride along with the runs: the "Serving load tests".
  std::vector<std::string> run_paths;
  std::vector<LoadgenFile> serving;
  for (const auto& p : c.runs) {
    if (classify_report_input(p) == ReportInput::loadgen)
      serving.push_back(load_loadgen_file(p));
    else
      run_paths.push_back(p);
  }
  if (run_paths.empty() && !serving.empty()) {
    // No run folder to write into: the outputs must be named.
    if (c.html.empty() && c.markdown.empty())
      throw UsageError("loadgen files alone have no run folder to write the report into: say where "
                       "it goes with --html FILE and/or --markdown FILE");
    if (!c.html.empty())
      emit(c.html, render_html_report(serving), "HTML");
    if (!c.markdown.empty())
      emit(c.markdown, render_markdown_report(serving), "markdown");
  }
  if (!run_paths.empty()) {
    // Several runs (one curriculum over several invocations) have no one folder to write into.
    if (run_paths.size() > 1 && c.html.empty())
      throw UsageError(fmt::format("{} run folders make one report: say where it goes with --html FILE "
                                   "(and --markdown FILE for the markdown)",
                                   run_paths.size()));
    std::vector<LoadedRun> loaded;
    for (const auto& r : run_paths)
      loaded.push_back(load_run(r));
    std::vector<std::string> replaced;
    LoadedRun run = merge_runs(std::move(loaded), &replaced);
    for (const auto& r : replaced)
      std::fprintf(stderr, "aisp: measured more than once, reported from the later run: %s\n",
                   r.c_str());
    if (!c.targets.empty()) {
      std::erase_if(run.results.targets,
                    [&](const TargetResult& t) { return !selector_matches(t.name, c.targets); });
      if (run.results.targets.empty())
        throw UsageError("no target of " + fmt::format("{}", fmt::join(run_paths, ", ")) +
                         " matches the selection");
    }
    const ReportOptions options{chapters_dir_or_default(c.chapters_dir)};
    const bool defaults = c.html.empty() && c.markdown.empty();
    const std::string html = defaults ? (fs::path(run.dir) / "report.html").string() : c.html;
    const std::string markdown = defaults ? (fs::path(run.dir) / "report.md").string() : c.markdown;
    if (!html.empty())
      emit(html, render_html_report(run, options, serving), "HTML");
    if (!markdown.empty())
      emit(markdown, render_markdown_report(run, options, serving), "markdown");
  }
  if (c.update_readme) {
    const auto updates = update_readmes(chapters_dir_or_default(c.chapters_dir), c.targets);
    if (updates.empty())
      std::fprintf(stderr, "aisp: no ladder has stored expectations: no README to update\n");
    for (const auto& u : updates) {
      if (!u.error.empty()) {
        code = static_cast<int>(ExitCode::usage);
        std::fprintf(stderr, "aisp: README of %s not updated: %s\n", u.target.c_str(),
                     u.error.c_str());
      } else {
        std::fprintf(stderr, "aisp: %s %s\n", u.readme.c_str(),
                     u.written ? "updated" : "already up to date");
      }
    }
  }
  return code;
}

} // namespace

void add_report_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<ReportCli>();
  auto* cmd = app.add_subcommand("report", "a run's HTML report (inline SVG charts, no network) "
                                           "and markdown; README tables from expectations");
  cmd->add_option("RUN_DIR", c->runs,
                  "run folder (or its results.json); default outputs: report.html and "
                  "report.md inside it. Several run folders of one machine (one curriculum run in "
                  "parts) make one report: --html is then required, and differing hardware keys "
                  "are refused. An aisp loadgen --out file (schema aisp.loadgen/1) adds its table "
                  "and latency-throughput curve to the report (loadgen files alone: name the "
                  "outputs with --html and/or --markdown)");
  cmd->add_option("--html", c->html, "write the HTML report here ('-' = stdout)");
  cmd->add_option("--markdown", c->markdown, "write the markdown report here ('-' = stdout)");
  cmd->add_flag(
      "--update-readme", c->update_readme,
      "regenerate the results tables between <!-- aisp:results:begin/end --> in ladder READMEs "
      "from stored expectations");
  cmd->add_option("--targets,-t", c->targets, "only these targets");
  cmd->add_option("--chapters-dir", c->chapters_dir,
                  "folder of the chapters: the summary's stored expectations and --update-readme "
                  "(default: the source tree's, else an installed aisp's share/aisp/chapters, else ./chapters)");
  cmd->callback([c, &ctx] { ctx.exit_code = report(*c); });
}

} // namespace aisp::cli
