// The aisp subcommands. Each add_* function registers its CLI11 subcommand(s) on the app; the callback
// stores the process exit code in ctx.exit_code. Logic lives in core/ and device/: these stay thin.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

namespace aisp::cli {

// Checks of numeric options with plain messages. CLI11's Range, PositiveNumber and NonNegativeNumber
// compare with < and >, which NaN passes ("nan" parses as a double, so `--max-time nan` would reach the
// measurement), and the last two word a rejection as "not in range 0.000000 to 1797693134862315...". Text
// that is not a number at all passes these checks: the option's own conversion then says so.
namespace detail {
inline bool parse_number(const std::string& text, double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0';
}
}  // namespace detail

// Rejects NaN only; chain it before a CLI::Range, which then decides about everything else.
inline CLI::Validator not_nan() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        return detail::parse_number(text, value) && std::isnan(value) ? "not a number: " + text : std::string{};
      },
      "", "NOT_NAN");
}

// > 0 (positive) or >= 0 (non_negative), NaN rejected.
inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!detail::parse_number(text, value)) return {};
        return value > 0 ? std::string{} : "must be greater than 0, got " + text;
      },
      "POSITIVE", "POSITIVE");
}
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!detail::parse_number(text, value)) return {};
        return value >= 0 ? std::string{} : "must be 0 or more, got " + text;
      },
      "NONNEGATIVE", "NONNEGATIVE");
}

struct Context {
  int exit_code = 0;
  const char* argv0 = nullptr;  // for re-executing aisp as a worker
  int argc = 0;
  char** argv = nullptr;
};

void add_bench_commands(CLI::App& app, Context& ctx);   // bench list-targets, bench run
void add_hw_commands(CLI::App& app, Context& ctx);      // hw info, hw peaks
void add_tools_commands(CLI::App& app, Context& ctx);   // tools roofline, occupancy, occupancy-tuning
void add_doctor_command(CLI::App& app, Context& ctx);   // doctor
void add_worker_command(CLI::App& app, Context& ctx);   // hidden: the worker process
void add_profile_command(CLI::App& app, Context& ctx);  // profile (and the hidden __profile-worker)
void add_report_command(CLI::App& app, Context& ctx);   // report (HTML, markdown, README tables)
void add_history_command(CLI::App& app, Context& ctx);  // history
void add_bench_check_commands(CLI::App& bench, Context& ctx);  // bench check, bench compare
void add_model_commands(CLI::App& app, Context& ctx);    // model make, model inspect (docs/serving-models.md)
void add_serve_commands(CLI::App& app, Context& ctx);    // serve, loadgen (docs/serving.md)
void add_route_command(CLI::App& app, Context& ctx);     // route (docs/routing.md)
void add_completion_command(CLI::App& app);              // hidden: completion bash (docs/install.md)

// Regression gating options of `bench run` (cli/cmd_bench_check.cpp; docs/regression-gating.md).
struct GatingCli {
  bool update_expectations = false;
  std::string chapters_dir;  // "" = find_chapters_dir's default
  std::string history;       // "" = history.sqlite beside the runs folder
  bool no_history = false;
};
void add_gating_options(CLI::App& run, GatingCli& g);
// After a `bench run` wrote `run_dir`: records it in the history and updates the expectations when asked.
// Returns the exit code to end with (ExitCode::usage when asked-for expectations could not be written).
int after_bench_run(const GatingCli& g, const std::string& out_root, const std::string& run_dir, int exit_code);
// --chapters-dir resolved (cli/chapters_dir.cpp): the option, else the source tree's chapters/ when it
// exists ($AISP_SOURCE_DIR, else the checkout aisp was built from), else <exe dir>/../share/aisp/chapters
// when it exists (an installed aisp), else ./chapters. `from` names the step that chose it.
struct ChaptersDir {
  std::string path;
  const char* from = "";  // "--chapters-dir", "source tree", "installed" or "working directory"
};
ChaptersDir find_chapters_dir(const std::string& option);
std::string chapters_dir_or_default(const std::string& option);  // find_chapters_dir(option).path

// `aisp hw peaks` (also run by `bench run`'s peaks worker, `__worker --peaks`): returns the exit code.
int run_hw_peaks(int device, const std::string& dir, const std::vector<std::string>& only, bool refresh,
                 const std::string& format);

// Entry point shared by the aisp binary and the test binaries that embed extra (hidden) ladders.
int run(int argc, char** argv);

}  // namespace aisp::cli
