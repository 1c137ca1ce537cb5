#include "cli/commands.hpp"
#include "device/orchestrator.hpp"

namespace aisp::cli {

// `aisp __worker --fd N`: not for people. The parent re-executes aisp this way for each target so that a
// crash, hang or lost CUDA context costs one variant, not the run.
void add_worker_command(CLI::App& app, Context& ctx) {
  auto* sub = app.add_subcommand("__worker", "internal: run one target as a worker process");
  sub->group("");  // hidden from --help
  auto fd = std::make_shared<int>(3);
  sub->add_option("--fd", *fd, "file descriptor for the JSON-lines protocol");
  sub->callback([&ctx, fd] { ctx.exit_code = worker_main(*fd); });
}

}  // namespace aisp::cli
