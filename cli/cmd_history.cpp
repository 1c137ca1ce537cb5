// `aisp history`: a target's trend across recorded runs, newest first (docs/regression-gating.md).
#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/results/history.hpp"
#include "core/results/run_folder.hpp"

namespace aisp::cli {

namespace {

struct HistoryCli {
  std::vector<std::string> targets;
  int last = 0;
  std::string format = "table";
  std::string history;
  std::vector<std::string> import;
};

int show_history(const HistoryCli& c) {
  const auto format = output_format_from_string(c.format);
  if (!format)
    throw UsageError(fmt::format("unknown --format '{}' (table, json, markdown, csv)", c.format));
  const std::string path = c.history.empty() ? default_history_path("artifacts/runs") : c.history;
  if (!c.import.empty()) {
    // Every folder is read before the first write, so that one bad folder records nothing.
    std::vector<LoadedRun> runs;
    for (const auto& dir : c.import)
      runs.push_back(load_run(dir));
    History writer(path, History::Access::read_write);
    for (const auto& run : runs) {
      writer.record(run);
      std::fprintf(stderr, "aisp: recorded %s in %s\n", run.results.run_id.c_str(), path.c_str());
    }
  }
  const History history(path, History::Access::read_only);
  const auto entries = history.trend(c.targets, c.last);
  if (entries.empty() && *format != OutputFormat::json) {
    std::fprintf(stderr, "aisp: no recorded runs%s in %s\n",
                 c.targets.empty() ? "" : fmt::format(" of {}", fmt::join(c.targets, ",")).c_str(),
                 path.c_str());
    return 0;
  }
  std::fputs(render_history(entries, *format).c_str(), stdout);
  return 0;
}

} // namespace

void add_history_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<HistoryCli>();
  auto* cmd = app.add_subcommand("history",
                                 "a target's trend across recorded runs (date, git, median, % of "
                                 "ceiling, verdict), newest first");
  cmd->add_option("--targets,-t", c->targets,
                  "selectors: chNN, chNN:ladder, chNN:ladder:NN_slug; default: all");
  cmd->add_option("--last", c->last, "only each target's N most recent runs (0 = all)")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--format", c->format, "table, json, markdown or csv")->capture_default_str();
  cmd->add_option("--history", c->history, "history database (default: artifacts/history.sqlite)");
  cmd->add_option("--import", c->import,
                  "first record these run folders (e.g. runs made on another machine)");
  cmd->callback([c, &ctx] { ctx.exit_code = show_history(*c); });
}

} // namespace aisp::cli
