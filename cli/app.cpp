#include <aisp_build_info.hpp>
#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <string>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/measure/verdict.hpp"

namespace aisp::cli {


int run(int argc, char** argv) {
  Context ctx;
  ctx.argv0 = argc > 0 ? argv[0] : "aisp";
  ctx.argc = argc;
  ctx.argv = argv;
  CLI::App app{"aisp: how fast is this kernel, how far from what this GPU allows, and is the optimized "
               "version really faster, and still right?"};
  app.name("aisp");
  app.footer(std::string(exit_code_help()) +
             "\nDocs: README.md, docs/results-schema.md, docs/measurement-methods.md\n");
  app.require_subcommand(1);
  // The release (CMake's project VERSION), the commit, and where the chapters' data is read from: what
  // tells a packaged aisp from a developer's build (docs/install.md).
  app.set_version_flag("--version", [] {
    const ChaptersDir chapters = find_chapters_dir("");
    return fmt::format("aisp {} (git {}{})\nchapters: {} ({})", AISP_VERSION, build_info::git_sha,
                       std::string(build_info::git_dirty) == "true" ? ", dirty" : "", chapters.path,
                       chapters.from);
  });
  add_bench_commands(app, ctx);
  add_hw_commands(app, ctx);
  add_tools_commands(app, ctx);
  add_doctor_command(app, ctx);
  add_worker_command(app, ctx);
  add_profile_command(app, ctx);
  add_report_command(app, ctx);
  add_history_command(app, ctx);
  add_model_commands(app, ctx);
  add_serve_commands(app, ctx);
  add_route_command(app, ctx);
  add_completion_command(app);  // last: it lists the commands registered above
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::puts(e.what());
    return 0;
  } catch (const CLI::ParseError& e) {
    // One line, then the exit code for bad input; `aisp --help` has the rest.
    std::fprintf(stderr, "aisp: %s (see 'aisp --help')\n", e.what());
    return static_cast<int>(ExitCode::usage);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "aisp: %s\n", e.what());
    return static_cast<int>(ExitCode::usage);
  } catch (const DataError& e) {
    std::fprintf(stderr, "aisp: %s\n", e.what());
    return static_cast<int>(ExitCode::usage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aisp: internal error: %s\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
  return ctx.exit_code;
}

}  // namespace aisp::cli
