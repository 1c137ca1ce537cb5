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
  // `--peaks`: measure the ceilings the cache lacks (bench run's first use on a GPU, docs/ceilings.md).
  struct Peaks {
    bool on = false;
    int device = 0;
    std::string dir = "artifacts/peaks";
    std::vector<std::string> only;
  };
  auto peaks = std::make_shared<Peaks>();
  sub->add_flag("--peaks", peaks->on, "measure missing ceilings instead of running a target");
  sub->add_option("--device", peaks->device, "CUDA device index (with --peaks)");
  sub->add_option("--peaks-dir", peaks->dir, "ceilings cache folder (with --peaks)");
  sub->add_option("--only", peaks->only, "probe groups (with --peaks)");
  sub->callback([&ctx, fd, peaks] {
    ctx.exit_code = peaks->on ? run_hw_peaks(peaks->device, peaks->dir, peaks->only, false, "table")
                              : worker_main(*fd);
  });
}

}  // namespace aisp::cli
