// The aisp subcommands. Each add_* function registers its CLI11 subcommand(s) on the app; the callback
// stores the process exit code in ctx.exit_code. Logic lives in core/ and device/: these stay thin.
#pragma once

#include <CLI/CLI.hpp>

namespace aisp::cli {

struct Context {
  int exit_code = 0;
  const char* argv0 = nullptr;  // for re-executing aisp as a worker
  int argc = 0;
  char** argv = nullptr;
};

void add_bench_commands(CLI::App& app, Context& ctx);   // bench list-targets, bench run
void add_hw_commands(CLI::App& app, Context& ctx);      // hw info
void add_doctor_command(CLI::App& app, Context& ctx);   // doctor
void add_worker_command(CLI::App& app, Context& ctx);   // hidden: the worker process

// Entry point shared by the aisp binary and the test binaries that embed extra (hidden) ladders.
int run(int argc, char** argv);

}  // namespace aisp::cli
