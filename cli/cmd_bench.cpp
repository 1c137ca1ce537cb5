#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress_display.hpp"
#include "core/base/error.hpp"
#include "core/results/render.hpp"
#include "device/ladder.hpp"
#include "device/orchestrator.hpp"
#include "device/profiler.hpp"

namespace aisp::cli {

namespace {

using profile::comparison_table;
using profile::render_comparison;

OutputFormat parse_format(const std::string& s, bool allow_csv_md = true) {
  const auto f = output_format_from_string(s);
  if (!f || (!allow_csv_md && (*f == OutputFormat::csv || *f == OutputFormat::markdown))) {
    throw UsageError(fmt::format("unknown --format '{}' (table, json{})", s,
                                 allow_csv_md ? ", markdown, csv" : ""));
  }
  return *f;
}

struct ListOptions {
  std::string chapter;
  bool all = false;
  std::string format = "table";
};

struct BenchRunCli {
  std::vector<std::string> targets;
  std::vector<std::string> axes;
  std::string mode;
  int warmup = 3;
  std::size_t min_samples = 10;
  double min_time = 0.2;
  double max_time = 5.0;
  bool max_time_given = false;  // --max-time on the command line: then no ladder raises it
  double target_ci = 0.01;
  double timeout = 120;
  std::string out = "artifacts/runs";
  std::string label;
  std::string format = "table";
  int device = 0;
  bool include_hidden = false;
  bool no_audit = false;
  std::string profile = "none";  // a metric set: Nsight Compute pass after timing (docs/profiling.md)
  GatingCli gating;  // history, --update-expectations (cli/cmd_bench_check.cpp)
};

void list_targets(const ListOptions& o) {
  const auto format = parse_format(o.format, false);
  const auto catalogue = LadderRegistry::instance().catalogue();
  std::vector<const TargetInfo*> shown;
  for (const auto& t : catalogue) {
    if (t.hidden && !o.all) continue;
    if (!o.chapter.empty() && t.chapter != o.chapter) continue;
    shown.push_back(&t);
  }
  if (!o.chapter.empty() && shown.empty()) {
    std::vector<std::string> chapters;
    for (const auto& t : catalogue) {
      if (!t.hidden || o.all) chapters.push_back(t.chapter);
    }
    const auto close = close_matches(o.chapter, chapters);
    throw UsageError(fmt::format("no targets in chapter '{}'{}", o.chapter,
                                 close.empty() ? "" : fmt::format(" (did you mean {}?)", fmt::join(close, ", "))));
  }
  std::fputs(render_catalogue(shown, format).c_str(), stdout);
}

int bench_run(const BenchRunCli& c, const Context& ctx) {
  RunOptions o;
  o.selectors = c.targets;
  for (const auto& a : c.axes) o.axis_sweeps.push_back(parse_axis_sweep(a));
  if (!c.mode.empty()) {
    if (c.mode != "cold" && c.mode != "hot") throw UsageError("--mode must be cold or hot, not '" + c.mode + "'");
    o.mode = c.mode == "cold" ? CacheMode::cold : CacheMode::hot;
  }
  o.l2_flush = l2_flush_from_env();  // a bad AISP_L2_FLUSH is bad input, said before anything runs
  const auto format = parse_format(c.format);
  const auto profile_set = profile::metric_set_from_string(c.profile);
  if (c.profile != "none" && !profile_set) {
    throw UsageError("unknown --profile '" + c.profile + "' (none, minimal, memory, compute, full)");
  }
  const std::string ncu = profile_set ? find_ncu("") : "";  // missing ncu is bad input: said before timing
  o.device = c.device;
  o.warmup_launches = c.warmup;
  o.rule.min_samples = c.min_samples;
  o.rule.min_time_s = c.min_time;
  o.rule.max_time_s = c.max_time;
  o.max_time_given = c.max_time_given;
  o.rule.target_rel_ci = c.target_ci;
  o.rule.noisy_rel_ci = std::max(0.03, c.target_ci);
  o.timeout_s = c.timeout;
  o.out_root = c.out;
  o.label = c.label;
  o.include_hidden = c.include_hidden;
  o.audit = !c.no_audit;
  for (int i = 0; i < ctx.argc; ++i) o.argv.emplace_back(ctx.argv[i]);
  try {
    RunOutcome outcome = run_with_progress(o);  // live status line on a terminal
    // Profiling runs after every target is timed, never during the timing.
    const auto prof = profile_set ? profile_after_bench(outcome, o, *profile_set, ncu, std::cerr) : ProfileOutcome{};
    std::fputs(render_results(outcome.results, format).c_str(), stdout);
    for (const auto& t : prof.data.targets) {
      if (format == OutputFormat::table) std::fputs(render_comparison(comparison_table(t, *profile_set)).c_str(), stdout);
    }
    std::vector<Verdict> verdicts;
    for (const auto& t : outcome.results.targets) {
      for (const auto& v : t.variants) verdicts.push_back(v.verdict);
    }
    ExitCode code = exit_code_for(verdicts);
    if (code == ExitCode::ok && prof.failed > 0) code = ExitCode::verdict_failure;  // asked-for profile missing
    const int rc = after_bench_run(c.gating, c.out, outcome.run_dir, static_cast<int>(code));
    std::fprintf(stderr, "aisp: results in %s (exit %d)\n", outcome.run_dir.c_str(), rc);
    return rc;
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", e.what());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
}

}  // namespace

void add_bench_commands(CLI::App& app, Context& ctx) {
  auto* bench = app.add_subcommand("bench", "list, run and compare the curriculum's ladders");
  bench->require_subcommand(1);
  add_bench_check_commands(*bench, ctx);

  auto list_opts = std::make_shared<ListOptions>();
  auto* list = bench->add_subcommand("list-targets", "targets with their variants, kinds and summaries (no GPU needed)");
  list->add_option("--chapter", list_opts->chapter, "only this chapter, e.g. ch07");
  list->add_flag("--all", list_opts->all, "include hidden test ladders (selftest, cheats)");
  list->add_option("--format", list_opts->format, "table or json")->capture_default_str();
  list->callback([list_opts] { list_targets(*list_opts); });

  auto run_opts = std::make_shared<BenchRunCli>();
  auto* run = bench->add_subcommand("run", "validate and time variants; writes artifacts/runs/<UTC time>_<label>/");
  run->add_option("--targets,-t", run_opts->targets,
                  "selectors: chNN, chNN:ladder, chNN:ladder:NN_slug (comma-separated or repeated); default: all");
  run->add_option("--axis,-a", run_opts->axes,
                  "set an axis, NAME=VALUE (n=1<<28, n=64Mi), or sweep it, NAME=V1,V2,... (n=1Mi,16Mi: one table "
                  "per point; several swept axes run their product, at most 64 points); repeatable");
  run->add_option("--mode", run_opts->mode, "cold (flush L2 before each sample) or hot; default: per target");
  run->add_option("--warmup", run_opts->warmup, "minimum warm-up launches per variant")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  run->add_option("--min-samples", run_opts->min_samples, "minimum timed samples per variant")
      ->capture_default_str()->check(CLI::Range(std::size_t{6}, std::size_t{100000000}));
  run->add_option("--min-time", run_opts->min_time, "minimum measured seconds per variant")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(0.0, 3600.0));
  auto* max_time = run->add_option("--max-time", run_opts->max_time, "sampling budget in seconds per variant (then NOISY if the CI is wider than 3%; a variant with too few samples for any CI samples on, up to 10x this, and one whose CI would narrow to 3% by 4x this samples on until it does). Without it, a ladder whose samples are long or scattered may ask for more (ch05:file_to_gpu 40 s; `aisp bench list-targets` shows it)")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(0.001, 36000.0));
  run->add_option("--target-ci", run_opts->target_ci, "stop when the median's 95% CI is within +-this fraction")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(0.0001, 0.5));
  run->add_option("--timeout", run_opts->timeout, "seconds a worker may stay silent before its variant is ERROR")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(1.0, 86400.0));
  run->add_option("--out", run_opts->out, "folder that receives the run folder")->capture_default_str();
  run->add_option("--label", run_opts->label, "suffix of the run folder's name (default: the selectors)");
  run->add_option("--format", run_opts->format, "stdout format: table, json, markdown or csv")->capture_default_str();
  run->add_option("--device", run_opts->device, "CUDA device index")->capture_default_str()->check(non_negative());
  run->add_flag("--include-hidden", run_opts->include_hidden, "allow hidden test ladders in the selection");
  run->add_option("--profile", run_opts->profile,
                  "after timing, profile the passing variants with Nsight Compute: none, minimal, memory, compute, full")
      ->capture_default_str();
  run->add_flag("--no-audit", run_opts->no_audit,
                "skip the activity/timing audit (only to measure its cost; results are then not audited)");
  add_gating_options(*run, run_opts->gating);
  run->callback([run_opts, max_time, &ctx] {
    run_opts->max_time_given = max_time->count() > 0;
    ctx.exit_code = bench_run(*run_opts, ctx);
  });
}

}  // namespace aisp::cli
