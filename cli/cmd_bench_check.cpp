// Regression gating on the command line (docs/regression-gating.md): `bench check` (a run against
// the stored expectations), `bench compare` (two stored runs), and what `bench run` does after a
// run (record it in the history; --update-expectations).
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress_display.hpp"
#include "core/results/compare.hpp"
#include "core/base/error.hpp"
#include "core/results/expectations.hpp"
#include "core/results/expectations_check.hpp"
#include "core/results/history.hpp"
#include "core/results/render.hpp"
#include "core/results/run_folder.hpp"
#include "device/orchestrator.hpp"

namespace aisp::cli {

namespace fs = std::filesystem;

namespace {

OutputFormat parse_output_format(const std::string& s) {
  const auto f = output_format_from_string(s);
  if (!f)
    throw UsageError(fmt::format("unknown --format '{}' (table, json, markdown, csv)", s));
  return *f;
}

// A fresh run's settings for `bench check` without --run: the sampling options of `bench run`.
struct CheckCli {
  std::vector<std::string> targets;
  std::string run;
  double threshold = k_default_check_threshold;
  bool strict = false;
  std::string format = "table";
  GatingCli gating;
  std::vector<std::string> axes;
  std::string mode;
  int device = 0;
  std::size_t min_samples = 10;
  double min_time = 0.2;
  double max_time = 5.0;
  double target_ci = 0.01;
  double timeout = 120;
  std::string out = "artifacts/runs";
  std::string label;
  bool include_hidden = false;
};

struct CompareCli {
  std::string run_a, run_b;
  std::vector<std::string> targets;
  std::string runs = "artifacts/runs";
  std::string format = "table";
};

// A run named by folder, by results.json, or by its id under the runs folder.
LoadedRun load_named_run(const std::string& name, const std::string& runs_root) {
  std::error_code ec;
  if (!fs::exists(name, ec) && fs::exists(fs::path(runs_root) / name, ec)) {
    return load_run((fs::path(runs_root) / name).string());
  }
  return load_run(name);
}

void require_selected(const LoadedRun& run, const std::vector<std::string>& selectors) {
  for (const auto& s : split_selectors(selectors)) {
    bool found = false;
    for (const auto& t : run.results.targets) {
      for (const auto& v : t.variants)
        found = found || selector_matches(v.name, {s});
    }
    if (!found)
      throw UsageError(fmt::format("'{}' matches nothing measured in {}", s, run.dir));
  }
}

int bench_check(const CheckCli& c, const Context& ctx) {
  const auto format = parse_output_format(c.format);
  const std::string chapters = chapters_dir_or_default(c.gating.chapters_dir);
  LoadedRun run;
  int run_code = 0;
  if (!c.run.empty()) {
    run = load_run(c.run);
    require_selected(run, c.targets);
    std::vector<Verdict> verdicts;
    for (const auto& t : run.results.targets) {
      for (const auto& v : t.variants) {
        if (selector_matches(v.name, c.targets))
          verdicts.push_back(v.verdict);
      }
    }
    run_code = static_cast<int>(exit_code_for(verdicts));
  } else {
    RunOptions o;
    o.selectors = c.targets;
    for (const auto& a : c.axes)
      o.axis_sweeps.push_back(parse_axis_sweep(a));
    if (!c.mode.empty()) {
      if (c.mode != "cold" && c.mode != "hot")
        throw UsageError("--mode must be cold or hot, not '" + c.mode + "'");
      o.mode = c.mode == "cold" ? CacheMode::cold : CacheMode::hot;
    }
    o.l2_flush = l2_flush_from_env();
    o.device = c.device;
    o.rule.min_samples = c.min_samples;
    o.rule.min_time_s = c.min_time;
    o.rule.max_time_s = c.max_time;
    o.rule.target_rel_ci = c.target_ci;
    o.rule.noisy_rel_ci = std::max(0.03, c.target_ci);
    o.timeout_s = c.timeout;
    o.out_root = c.out;
    o.label = c.label;
    o.include_hidden = c.include_hidden;
    for (int i = 0; i < ctx.argc; ++i)
      o.argv.emplace_back(ctx.argv[i]);
    // Bad input fails before the GPU spends minutes on a run that could not be checked.
    check_selection(o);
    std::error_code ec;
    if (!fs::is_directory(chapters, ec)) {
      throw UsageError(
          fmt::format("chapters folder {} does not exist (see --chapters-dir)", chapters));
    }
    try {
      const RunOutcome outcome = run_with_progress(o);
      std::vector<Verdict> verdicts;
      for (const auto& t : outcome.results.targets) {
        for (const auto& v : t.variants)
          verdicts.push_back(v.verdict);
      }
      GatingCli record = c.gating;
      record.update_expectations = false; // a check never moves the expectations it checks against
      run_code = after_bench_run(record, c.out, outcome.run_dir,
                                 static_cast<int>(exit_code_for(verdicts)));
      run = load_run(outcome.run_dir);
      std::fprintf(stderr, "aisp: results in %s\n", outcome.run_dir.c_str());
    } catch (const NoDeviceError& e) {
      std::fprintf(stderr, "aisp: no CUDA device: %s\n", e.what());
      return static_cast<int>(ExitCode::no_cuda_device);
    }
  }
  CheckReport report = check_run(run, chapters, c.targets, c.threshold);
  report.strict = c.strict;
  std::fputs(render_check(report, format).c_str(), stdout);
  // check_exit_code ranks the findings (1 FAIL/INVALID/IMPLAUSIBLE/ERROR, 4 REGRESSED, 5 drift) and
  // the printed outcome line says the same; the run's own code only stands in should the check have
  // missed a failing variant.
  const ExitCode code = check_exit_code(report, c.strict);
  if (code == ExitCode::ok && run_code != 0)
    return run_code;
  return static_cast<int>(code);
}

int bench_compare(const CompareCli& c) {
  const auto format = parse_output_format(c.format);
  const LoadedRun a = load_named_run(c.run_a, c.runs);
  const LoadedRun b = load_named_run(c.run_b, c.runs);
  const CompareResult result = compare_runs(a, b, c.targets);
  if (result.rows.empty())
    throw UsageError("nothing to compare: no variant of either run matches the selection");
  std::fputs(render_compare(result, format).c_str(), stdout);
  return 0;
}

// What update_expectations did, on stderr; true when a target's file could not be written.
bool print_updates(const std::vector<ExpectationUpdate>& updates) {
  bool failed = false;
  for (const auto& u : updates) {
    if (!u.error.empty()) {
      failed = true;
      std::fprintf(stderr, "aisp: expectations of %s not updated: %s\n", u.target.c_str(),
                   u.error.c_str());
    } else {
      std::fprintf(stderr, "aisp: expectations %s %s\n", u.path.c_str(),
                   u.written ? "written:" : "unchanged:");
    }
    for (const auto& n : u.notes)
      std::fprintf(stderr, "  %s\n", n.c_str());
  }
  return failed;
}

struct StoreCli {
  std::string run;
  std::vector<std::string> targets;
  std::string chapters_dir;
  std::string runs = "artifacts/runs";
};

// `bench store`: the expectations a stored run's --update-expectations would have written, written now
// (a run made without the flag, or one cut short after some targets had finished: each target's results
// are complete when they are in results.json). The same function, the same rules: only passing variants,
// the run's own provenance.
int bench_store(const StoreCli& c) {
  const LoadedRun run = load_named_run(c.run, c.runs);
  const auto updates = update_expectations(run, chapters_dir_or_default(c.chapters_dir), c.targets);
  if (updates.empty())
    throw UsageError("nothing to store: no target of the run " + c.run + " matches the selection");
  return print_updates(updates) ? static_cast<int>(ExitCode::usage) : 0;
}

} // namespace

void add_gating_options(CLI::App& run, GatingCli& g) {
  run.add_flag("--update-expectations", g.update_expectations,
               "write the passing variants' results to "
               "chapters/chNN_*/<ladder>/expectations_<hardware key>.json");
  run.add_option("--chapters-dir", g.chapters_dir,
                 "folder of the chapters (where expectations live); default: the source tree's, "
                 "else the installed <prefix>/share/aisp/chapters, else ./chapters");
  run.add_option("--history", g.history,
                 "history database (default: history.sqlite beside the --out folder)");
  run.add_flag("--no-history", g.no_history, "do not record this run in the history database");
}

int after_bench_run(const GatingCli& g, const std::string& out_root, const std::string& run_dir,
                    int exit_code) {
  LoadedRun run;
  try {
    run = load_run(run_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aisp: cannot read the run back for history and expectations: %s\n",
                 e.what());
    return g.update_expectations && exit_code == 0 ? static_cast<int>(ExitCode::usage) : exit_code;
  }
  if (!g.no_history) {
    const std::string path = g.history.empty() ? default_history_path(out_root) : g.history;
    try {
      History(path, History::Access::read_write).record(run);
      std::fprintf(stderr, "aisp: recorded in the history %s\n", path.c_str());
    } catch (const std::exception& e) {
      // The run folder holds everything: a history that cannot take the run must not lose it.
      std::fprintf(stderr, "aisp: warning: not recorded in the history: %s\n", e.what());
    }
  }
  if (!g.update_expectations)
    return exit_code;
#ifdef AISP_TEST_SLOWDOWN
  std::fprintf(stderr, "aisp: expectations not updated: this build has the test-only AISP_TEST_SLOWDOWN "
                       "flag (its ch07:copy:03_vectorized is slowed on purpose)\n");
  return exit_code == 0 ? static_cast<int>(ExitCode::usage) : exit_code;
#endif
  const bool failed = print_updates(update_expectations(run, chapters_dir_or_default(g.chapters_dir)));
  return failed && exit_code == 0 ? static_cast<int>(ExitCode::usage) : exit_code;
}

void add_bench_check_commands(CLI::App& bench, Context& ctx) {
  auto c = std::make_shared<CheckCli>();
  auto* check = bench.add_subcommand(
      "check", "compare a run (a fresh one unless --run) with the stored expectations; exit 4 on a "
               "regression, 5 when only the machine drifted (its vendor reference moved)");
  check->add_option("--targets,-t", c->targets,
                    "selectors: chNN, chNN:ladder, chNN:ladder:NN_slug; default: all");
  check->add_option("--run", c->run, "a stored run folder to check instead of running now");
  check
      ->add_option(
          "--threshold", c->threshold,
          "tolerated slowdown as a fraction; a regression is slower by more than max(this, the "
          "combined interval)")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(0.0, 1.0));
  check->add_flag("--strict", c->strict,
                  "also exit 4 when a variant is INCONCLUSIVE or NOT-COMPARABLE");
  check->add_option("--format", c->format, "table, json, markdown or csv")->capture_default_str();
  check->add_option("--chapters-dir", c->gating.chapters_dir,
                    "folder of the chapters (where expectations live)");
  check->add_option("--history", c->gating.history, "history database of the fresh run");
  check->add_flag("--no-history", c->gating.no_history,
                  "do not record the fresh run in the history");
  check->add_option("--axis,-a", c->axes, "fresh run: set an axis, NAME=VALUE, or sweep it, NAME=V1,V2,...; repeatable");
  check->add_option("--mode", c->mode, "fresh run: cold or hot; default: per target");
  check->add_option("--device", c->device, "fresh run: CUDA device index")
      ->check(non_negative());
  check->add_option("--min-samples", c->min_samples, "fresh run: minimum timed samples per variant")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{6}, std::size_t{100000000}));
  check->add_option("--min-time", c->min_time, "fresh run: minimum measured seconds per variant")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(0.0, 3600.0));
  check->add_option("--max-time", c->max_time, "fresh run: sampling budget in seconds per variant")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(0.001, 36000.0));
  check
      ->add_option("--target-ci", c->target_ci,
                   "fresh run: stop when the median's 95% CI is within +-this")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(0.0001, 0.5));
  check->add_option("--timeout", c->timeout, "fresh run: seconds a worker may stay silent")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(1.0, 86400.0));
  check->add_option("--out", c->out, "fresh run: folder that receives the run folder")
      ->capture_default_str();
  check->add_option("--label", c->label, "fresh run: suffix of the run folder's name");
  check->add_flag("--include-hidden", c->include_hidden,
                  "allow hidden test ladders in the selection");
  check->callback([c, &ctx] { ctx.exit_code = bench_check(*c, ctx); });

  auto k = std::make_shared<CompareCli>();
  auto* compare =
      bench.add_subcommand("compare", "two stored runs variant by variant: medians, speedup of B "
                                      "over A with its interval, verdicts");
  compare->add_option("RUN_A", k->run_a, "run folder, results.json, or run id under --runs")
      ->required();
  compare->add_option("RUN_B", k->run_b, "run folder, results.json, or run id under --runs")
      ->required();
  compare->add_option("--targets,-t", k->targets, "only these selectors");
  compare->add_option("--runs", k->runs, "where run ids are looked up")->capture_default_str();
  compare->add_option("--format", k->format, "table, json, markdown or csv")->capture_default_str();
  compare->callback([k, &ctx] { ctx.exit_code = bench_compare(*k); });

  auto st = std::make_shared<StoreCli>();
  auto* store = bench.add_subcommand(
      "store", "write the expectations of a stored run's passing variants, as --update-expectations "
               "would have at its end (a run made without it, or cut short after some targets finished)");
  store->add_option("--run", st->run, "run folder, results.json, or run id under --runs")->required();
  store->add_option("--targets,-t", st->targets, "only these selectors; default: every target of the run");
  store->add_option("--runs", st->runs, "where run ids are looked up")->capture_default_str();
  store->add_option("--chapters-dir", st->chapters_dir,
                    "folder of the chapters (where expectations live); default as for bench run");
  store->callback([st, &ctx] { ctx.exit_code = bench_store(*st); });
}

} // namespace aisp::cli
