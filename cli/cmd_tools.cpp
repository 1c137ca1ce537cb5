// `aisp tools ...`: helpers around stored runs. Each tool registers itself in add_tools_commands with
// its own add_* function below, so that more tools (occupancy, ...) slot in beside roofline.
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/results.hpp"
#include "core/roofline.hpp"

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

}  // namespace

void add_tools_commands(CLI::App& app, Context& ctx) {
  auto* tools = app.add_subcommand("tools", "tools around stored runs (roofline)");
  tools->require_subcommand(1);
  add_roofline(*tools, ctx);
}

}  // namespace aisp::cli
