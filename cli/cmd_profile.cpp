// `aisp profile`: Nsight Compute capture of selected variants, one side-by-side table per target
// (docs/profiling.md). Also registers the hidden `__profile-worker` that ncu runs.
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/base/axes.hpp"
#include "core/base/error.hpp"
#include "core/profile/profile.hpp"
#include "core/measure/verdict.hpp"
#include "device/orchestrator.hpp"
#include "device/profiler.hpp"

namespace aisp::cli {

namespace {

struct ProfileCli {
  std::vector<std::string> targets;
  std::vector<std::string> axes;
  std::string set = "minimal";
  std::string replay = "kernel";
  std::string clock_control = "none";
  std::string out;
  std::string ncu;
  std::string format = "table";
  int device = 0;
  int warmup = 3;
  double timeout = 600;
  int source = 0;
  bool include_hidden = false;
};

int profile_run(const ProfileCli& c) {
  ProfileOptions o;
  const auto set = profile::metric_set_from_string(c.set);
  if (!set) throw UsageError(fmt::format("unknown --set '{}' (minimal, memory, compute, full)", c.set));
  const auto replay = profile::replay_mode_from_string(c.replay);
  if (!replay)
    throw UsageError(fmt::format("unknown --replay-mode '{}' (kernel, application, range)", c.replay));
  if (c.clock_control != "none" && c.clock_control != "base") {
    throw UsageError(fmt::format("unknown --clock-control '{}' (none, base)", c.clock_control));
  }
  if (c.format != "table" && c.format != "json")
    throw UsageError(fmt::format("unknown --format '{}' (table, json)", c.format));
  if (c.targets.empty()) throw UsageError("profile needs --targets (e.g. --targets ch07:copy)");
  if (c.source > 0 && *set != profile::MetricSet::full) {
    throw UsageError("--source needs --set full (the per-instruction stall samples come with its SourceCounters)");
  }
  o.selectors = c.targets;
  for (const auto& a : c.axes) o.axis_overrides.push_back(parse_axis_assignment(a));
  o.include_hidden = c.include_hidden;
  o.set = *set;
  o.replay = *replay;
  o.lock_clocks_to_base = c.clock_control == "base";
  o.ncu = c.ncu;
  o.out_dir = c.out;
  o.device = c.device;
  o.warmup_launches = c.warmup;
  o.timeout_s = c.timeout;
  o.source_top = static_cast<std::size_t>(c.source);
  try {
    const ProfileOutcome p = run_profiles(o, std::cerr);
    if (c.format == "json") {
      std::fputs((profile::to_json(p.data).dump(2) + "\n").c_str(), stdout);
    } else {
      for (const auto& t : p.data.targets) {
        std::fputs(profile::render_comparison(profile::comparison_table(t, o.set)).c_str(), stdout);
        for (const auto& v : t.variants) {
          if (v.source) {
            std::fputs(("\n" + profile::render_source_summary(*v.source, v.name)).c_str(), stdout);
          } else if (!v.source_error.empty()) {
            std::fprintf(stdout, "\n%s: no source page: %s\n", v.name.c_str(), v.source_error.c_str());
          }
        }
      }
    }
    if (!p.machine_wide_error.empty()) {
      std::fprintf(stderr, "aisp: cannot profile on this machine: %s\n", p.machine_wide_error.c_str());
      return static_cast<int>(ExitCode::verdict_failure);
    }
    std::fprintf(stderr, "aisp: profiles in %s (profile.json, one .ncu-rep per variant)\n",
                 p.out_dir.c_str());
    return static_cast<int>(p.failed > 0 ? ExitCode::verdict_failure : ExitCode::ok);
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", e.what());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
}

}  // namespace

void add_profile_command(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<ProfileCli>();
  auto* sub = app.add_subcommand(
      "profile",
      "Nsight Compute capture of variants: one .ncu-rep each, a side-by-side metric table, profile.json");
  sub->add_option("--targets,-t", opts->targets,
                  "selectors: chNN, chNN:ladder, chNN:ladder:NN_slug (comma-separated or repeated)");
  sub->add_option("--axis,-a", opts->axes, "override an axis, NAME=VALUE (e.g. n=1<<28); repeatable");
  sub->add_option("--set", opts->set, "metric set: minimal, memory, compute or full (docs/profiling.md)")
      ->capture_default_str();
  sub->add_option("--replay-mode", opts->replay, "ncu replay: kernel, application or range")
      ->capture_default_str();
  sub->add_option(
         "--clock-control", opts->clock_control,
         "none keeps the clocks as found; base lets ncu lock them to base (changes the card's clocks)")
      ->capture_default_str();
  sub->add_option("--out", opts->out,
                  "folder for the reports (default artifacts/profiles/<UTC time>_<selectors>)");
  sub->add_option("--ncu", opts->ncu,
                  "the ncu executable (default: ncu on PATH, then /usr/local/cuda/bin/ncu)");
  sub->add_option("--format", opts->format, "stdout: table or json (profile.json's content)")
      ->capture_default_str();
  sub->add_option("--device", opts->device, "CUDA device index")
      ->capture_default_str()
      ->check(non_negative());
  sub->add_option("--warmup", opts->warmup, "launches before the profiled one")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->add_option("--timeout", opts->timeout, "seconds each ncu process may run")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--source", opts->source,
                  "also read each report's Source page and print, per variant, the stall reasons, the N SASS "
                  "instructions with the most stall samples and the N most executed opcodes (needs --set full)")
      ->check(CLI::Range(1, 1000));
  sub->add_flag("--include-hidden", opts->include_hidden, "allow hidden test ladders in the selection");
  sub->callback([opts, &ctx] { ctx.exit_code = profile_run(*opts); });

  // `aisp __profile-worker --config FILE`: what ncu runs; not for people.
  auto* worker = app.add_subcommand("__profile-worker", "internal: one variant's profiled launch, under ncu");
  worker->group("");
  auto config = std::make_shared<std::string>();
  worker->add_option("--config", *config, "the worker's JSON config")->required();
  worker->callback([&ctx, config] { ctx.exit_code = profile_worker_main(*config); });
}

}  // namespace aisp::cli
