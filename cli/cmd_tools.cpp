// `aisp tools ...`: helpers around runs. Each tool registers itself in add_tools_commands with its own
// add_* function below: roofline (stored runs), occupancy (a pure formula, no GPU) and occupancy-tuning
// (runs a ladder's `block` axis over several values).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/progress_display.hpp"
#include "core/base/axes.hpp"
#include "core/base/error.hpp"
#include "core/measure/occupancy.hpp"
#include "core/results/results.hpp"
#include "core/results/roofline.hpp"
#include "core/results/text_table.hpp"
#include "core/measure/verdict.hpp"
#include "device/ladder.hpp"
#include "device/orchestrator.hpp"

namespace aisp::cli {

namespace {

namespace fs = std::filesystem;

// The newest run folder under `root` that holds a results.json (run folders start with a UTC timestamp,
// so the newest sorts last).
std::string newest_run(const std::string& root) {
  std::error_code ec;
  std::string best;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory(ec) && fs::exists(e.path() / "results.json", ec)) {
      const std::string name = e.path().filename().string();
      if (best.empty() || name > fs::path(best).filename().string()) best = e.path().string();
    }
  }
  if (best.empty()) throw UsageError(fmt::format("no run folder with a results.json under {} (run 'aisp bench run' "
                                                 "first, or pass --run DIR)",
                                                 root));
  return best;
}

RunResults load_results(const std::string& run) {
  fs::path file(run);
  std::error_code ec;
  if (fs::is_directory(file, ec)) file /= "results.json";
  std::ifstream in(file);
  if (!in) throw UsageError("cannot read " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    return run_results_from_json(nlohmann::json::parse(text.str()));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{} is not valid JSON: {}", file.string(), e.what()));
  }
}

struct RooflineCli {
  std::string run;
  std::string runs = "artifacts/runs";
  std::string svg;
  std::string format = "table";
};

int roofline(const RooflineCli& c) {
  if (c.format != "table" && c.format != "json") throw UsageError("unknown --format '" + c.format + "' (table, json)");
  const std::string run = c.run.empty() ? newest_run(c.runs) : c.run;
  const RunResults r = load_results(run);
  if (!c.svg.empty()) {
    const std::string svg = roofline::render_svg(roofline::chart_of(r));
    const fs::path tmp = c.svg + ".tmp";
    {
      std::ofstream out(tmp);
      out << svg;
      if (!out) throw UsageError("cannot write " + tmp.string());
    }
    std::error_code ec;
    fs::rename(tmp, c.svg, ec);
    if (ec) throw UsageError(fmt::format("cannot write {}: {}", c.svg, ec.message()));
  }
  if (c.format == "json") {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& t : r.targets) {
      for (const auto& v : t.variants) {
        rows.push_back({{"variant", v.name},
                        {"verdict", to_string(v.verdict)},
                        {"roofline", v.roofline ? to_json(*v.roofline) : nlohmann::ordered_json(nullptr)}});
      }
    }
    nlohmann::ordered_json doc{{"run", run},
                               {"ceilings", r.ceilings ? to_json(*r.ceilings) : nlohmann::ordered_json(nullptr)},
                               {"variants", rows}};
    if (!c.svg.empty()) doc["svg"] = c.svg;
    std::puts(doc.dump(2).c_str());
    return 0;
  }
  std::printf("run: %s\n", run.c_str());
  std::fputs(render_roofline_table(r).c_str(), stdout);
  if (!c.svg.empty()) std::printf("\nroofline SVG: %s\n", c.svg.c_str());
  return 0;
}

void add_roofline(CLI::App& tools, Context& ctx) {
  auto o = std::make_shared<RooflineCli>();
  auto* sub = tools.add_subcommand("roofline", "arithmetic intensity, achieved rate, bound and % of it for the "
                                               "variants of a run, against its measured ceilings; optional SVG");
  sub->add_option("--run", o->run, "run folder or results.json (default: the newest run under --runs)");
  sub->add_option("--runs", o->runs, "where run folders live")->capture_default_str();
  sub->add_option("--svg", o->svg, "also write the roofline plot to this SVG file");
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  sub->callback([o, &ctx] { ctx.exit_code = roofline(*o); });
}

// --- occupancy: the calculator (core/measure/occupancy.hpp, docs/occupancy.md) ---

struct OccupancyCli {
  int threads = 0;
  int regs = 0;
  std::string smem = "0";
  std::string arch = "sm_90";
  std::string format = "table";
};

int occupancy_tool(const OccupancyCli& c) {
  if (c.format != "table" && c.format != "json") throw UsageError("unknown --format '" + c.format + "' (table, json)");
  const auto arch = occupancy::find_architecture(c.arch);
  if (!arch) {
    std::vector<std::string> names;
    for (const auto& a : occupancy::known_architectures()) names.push_back(a.name);
    throw UsageError(fmt::format("unknown --arch '{}' (known: {})", c.arch, fmt::join(names, ", ")));
  }
  const std::int64_t smem = parse_axis_value(c.smem);  // accepts 49152, 48Ki, 3*16384
  const occupancy::Occupancy o = occupancy::compute(*arch, {c.threads, c.regs, smem});
  std::vector<std::string> binding;
  for (auto l : o.binding) binding.emplace_back(occupancy::to_string(l));
  if (c.format == "json") {
    nlohmann::ordered_json j{{"arch", arch->name},
                             {"threads_per_block", c.threads},
                             {"regs_per_thread", c.regs},
                             {"smem_per_block", smem},
                             {"blocks_by_warps", o.blocks_by_warps},
                             {"blocks_by_block_slots", o.blocks_by_block_slots},
                             {"blocks_by_registers", o.blocks_by_registers},
                             {"blocks_by_smem", o.blocks_by_smem},
                             {"active_blocks_per_sm", o.active_blocks},
                             {"active_warps_per_sm", o.active_warps},
                             {"max_warps_per_sm", arch->max_warps_per_sm},
                             {"occupancy", o.occupancy},
                             {"bound_by", binding}};
    std::puts(j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %d threads (%d warps) per block, %d registers per thread, %lld B shared memory per block\n",
              arch->name.c_str(), c.threads, o.warps_per_block, c.regs, static_cast<long long>(smem));
  TextTable t{{"limit", "blocks/SM", "why"}, {}};
  t.rows.push_back({"warp slots", std::to_string(o.blocks_by_warps),
                    fmt::format("{} warps per SM / {} per block", arch->max_warps_per_sm, o.warps_per_block)});
  t.rows.push_back({"block slots", std::to_string(o.blocks_by_block_slots), "at most this many blocks per SM"});
  t.rows.push_back({"registers", std::to_string(o.blocks_by_registers),
                    o.regs_per_warp == 0 ? std::string("no registers declared")
                                         : fmt::format("{} per warp (units of {}); {} warps fit each of {} "
                                                       "sub-partitions",
                                                       o.regs_per_warp, arch->reg_alloc_unit,
                                                       arch->regs_per_sm / arch->sub_partitions / o.regs_per_warp,
                                                       arch->sub_partitions)});
  t.rows.push_back({"shared memory", std::to_string(o.blocks_by_smem),
                    o.smem_per_block == 0 ? std::string("none used")
                                          : fmt::format("{} B per block allocated ({} B reserved, units of {} B) "
                                                        "of {} B per SM",
                                                        o.smem_per_block, arch->smem_reserved_per_block,
                                                        arch->smem_alloc_unit, arch->smem_per_sm)});
  std::fputs(render_text_table(t, OutputFormat::table).c_str(), stdout);
  std::printf("active blocks/SM: %d   active warps/SM: %d of %d   occupancy: %.1f%%   bound by: %s\n",
              o.active_blocks, o.active_warps, arch->max_warps_per_sm, 100.0 * o.occupancy,
              fmt::format("{}", fmt::join(binding, ", ")).c_str());
  if (smem > arch->smem_per_block_default) {
    std::printf("note: over %lld B per block needs cudaFuncSetAttribute(..., "
                "cudaFuncAttributeMaxDynamicSharedMemorySize, ...) before the launch\n",
                static_cast<long long>(arch->smem_per_block_default));
  }
  return 0;
}

void add_occupancy(CLI::App& tools, Context& ctx) {
  auto o = std::make_shared<OccupancyCli>();
  auto* sub = tools.add_subcommand("occupancy", "occupancy calculator: active blocks and warps per SM, occupancy "
                                                "and the binding limit for a block size, registers and shared "
                                                "memory (no GPU needed; docs/occupancy.md)");
  sub->add_option("--threads", o->threads, "threads per block")->required();
  sub->add_option("--regs", o->regs, "registers per thread (cuobjdump --dump-resource-usage, -Xptxas -v)")
      ->required();
  sub->add_option("--smem", o->smem, "shared memory per block in bytes, static + dynamic (e.g. 49152, 48Ki)")
      ->capture_default_str();
  sub->add_option("--arch", o->arch, "architecture: sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, sm_100")
      ->capture_default_str();
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  sub->callback([o, &ctx] { ctx.exit_code = occupancy_tool(*o); });
}

// --- occupancy-tuning: one run per value of a ladder's `block` axis ---

struct OccupancyTuningCli {
  std::vector<std::string> targets;
  std::vector<std::int64_t> values = {64, 128, 256, 512, 1024};
  std::vector<std::string> axes;
  std::string mode;
  double max_time = 2.0;
  double timeout = 120;
  std::string out = "artifacts/runs";
  int device = 0;
  std::string format = "table";
};

struct TuningRow {
  std::string variant;
  std::int64_t block = 0;
  std::string verdict;
  double median_ms = 0;
  double gb_per_s = 0;
  std::map<std::string, std::string> facts;
};

int occupancy_tuning(const OccupancyTuningCli& c, const Context& ctx) {
  if (c.format != "table" && c.format != "json") throw UsageError("unknown --format '" + c.format + "' (table, json)");
  if (c.targets.empty()) throw UsageError("occupancy-tuning needs --targets (a ladder with a 'block' axis)");
  if (c.values.empty()) throw UsageError("--values needs at least one block size");
  for (auto v : c.values) {
    if (v < 1 || v > 1024) throw UsageError(fmt::format("--values: a block size must be 1..1024, not {}", v));
  }
  const auto catalogue = LadderRegistry::instance().catalogue();
  const Selection sel = select(catalogue, c.targets);
  for (const auto& item : sel.items) {
    const auto& axes = item.target->axes;
    if (std::none_of(axes.begin(), axes.end(), [](const AxisSpec& a) { return a.name == "block"; })) {
      throw UsageError(fmt::format("{} has no 'block' axis to tune (occupancy-tuning sweeps the block size; see "
                                   "'aisp bench list-targets')",
                                   item.target->name()));
    }
  }
  std::vector<std::pair<std::string, std::int64_t>> base;
  for (const auto& a : c.axes) {
    auto kv = parse_axis_assignment(a);
    if (kv.first == "block") throw UsageError("--axis block=... is what --values sets");
    base.push_back(kv);
  }
  std::optional<CacheMode> mode;
  if (!c.mode.empty()) {
    if (c.mode != "cold" && c.mode != "hot") throw UsageError("--mode must be cold or hot, not '" + c.mode + "'");
    mode = c.mode == "cold" ? CacheMode::cold : CacheMode::hot;
  }
  const L2Flush l2_flush = l2_flush_from_env();
  // Bad axes or selectors fail here, before any value is run.
  {
    RunOptions probe;
    probe.selectors = c.targets;
    probe.axis_overrides = base;
    probe.axis_overrides.emplace_back("block", c.values.front());
    check_selection(probe);
  }
  std::vector<TuningRow> rows;
  std::vector<Verdict> verdicts;
  try {
    for (const std::int64_t value : c.values) {
      RunOptions o;
      o.selectors = c.targets;
      o.axis_overrides = base;
      o.axis_overrides.emplace_back("block", value);
      o.mode = mode;
      o.l2_flush = l2_flush;
      o.rule.max_time_s = c.max_time;
      o.timeout_s = c.timeout;
      o.out_root = c.out;
      o.device = c.device;
      o.label = fmt::format("occupancy_tuning_block{}", value);
      for (int i = 0; i < ctx.argc; ++i) o.argv.emplace_back(ctx.argv[i]);
      const RunOutcome outcome = run_with_progress(o);
      for (const auto& t : outcome.results.targets) {
        for (const auto& v : t.variants) {
          verdicts.push_back(v.verdict);
          rows.push_back({v.name, value, std::string(to_string(v.verdict)), v.stats ? v.stats->median : 0.0,
                          v.gb_per_s, {v.facts.begin(), v.facts.end()}});
        }
      }
    }
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", e.what());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TuningRow& a, const TuningRow& b) { return a.variant < b.variant; });
  const auto fact = [](const TuningRow& r, const char* name) {
    const auto it = r.facts.find(name);
    return it == r.facts.end() ? std::string("-") : it->second;
  };
  if (c.format == "json") {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json facts = nlohmann::ordered_json::object();
      for (const auto& [k, v] : r.facts) facts[k] = v;
      j.push_back({{"variant", r.variant}, {"block", r.block}, {"verdict", r.verdict}, {"median_ms", r.median_ms},
                   {"gb_per_s", r.gb_per_s}, {"facts", facts}});
    }
    std::puts(j.dump(2).c_str());
  } else {
    // The fastest block size of each variant is marked, so the table answers the question it is run for.
    std::map<std::string, double> best;
    for (const auto& r : rows) {
      if (r.median_ms > 0 && (best[r.variant] == 0 || r.median_ms < best[r.variant])) best[r.variant] = r.median_ms;
    }
    TextTable t{{"variant", "block", "predicted occupancy", "blocks/SM", "regs", "median", "GB/s", "verdict"}, {}};
    for (const auto& r : rows) {
      const std::string occ = fact(r, "occupancy_pct");
      t.rows.push_back({r.variant, std::to_string(r.block), occ == "-" ? occ : occ + "%", fact(r, "blocks_per_sm"),
                        fact(r, "regs"),
                        r.median_ms > 0 ? fmt::format("{:.4f} ms{}", r.median_ms, r.median_ms == best[r.variant] ? " *" : "")
                                        : std::string("-"),
                        r.gb_per_s > 0 ? fmt::format("{:.0f}", r.gb_per_s) : std::string("-"), r.verdict});
    }
    std::fputs(render_text_table(t, OutputFormat::table).c_str(), stdout);
    std::puts("* fastest block size of the variant. Predicted occupancy: cudaOccupancyMaxActiveBlocksPerMultiprocessor "
              "for the variant's kernel (its facts; '-' when it reports none).");
  }
  return static_cast<int>(exit_code_for(verdicts));
}

void add_occupancy_tuning(CLI::App& tools, Context& ctx) {
  auto o = std::make_shared<OccupancyTuningCli>();
  auto* sub = tools.add_subcommand("occupancy-tuning", "run ladders at several values of their 'block' axis and "
                                                       "print predicted occupancy beside measured time (GPU)");
  sub->add_option("--targets,-t", o->targets, "selectors of ladders with a 'block' axis (chNN:ladder[:NN_slug])")
      ->required();
  sub->add_option("--values", o->values, "block sizes to run, comma-separated")
      ->delimiter(',')->capture_default_str();
  sub->add_option("--axis,-a", o->axes, "override another axis, NAME=VALUE; repeatable");
  sub->add_option("--mode", o->mode, "cold or hot; default: per target");
  sub->add_option("--max-time", o->max_time, "sampling budget in seconds per variant and value")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(0.001, 36000.0));
  sub->add_option("--timeout", o->timeout, "seconds a worker may stay silent before its variant is ERROR")
      ->capture_default_str()->check(not_nan())->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--out", o->out, "folder that receives one run folder per value")->capture_default_str();
  sub->add_option("--device", o->device, "CUDA device index")->capture_default_str()->check(non_negative());
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  sub->callback([o, &ctx] { ctx.exit_code = occupancy_tuning(*o, ctx); });
}

}  // namespace

void add_tools_commands(CLI::App& app, Context& ctx) {
  auto* tools = app.add_subcommand("tools", "roofline of a stored run, occupancy calculator, occupancy tuning");
  tools->require_subcommand(1);
  add_roofline(*tools, ctx);
  add_occupancy(*tools, ctx);
  add_occupancy_tuning(*tools, ctx);
}

}  // namespace aisp::cli
