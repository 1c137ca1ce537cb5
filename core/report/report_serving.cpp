#include "core/report/report_serving.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/base/error.hpp"
#include "core/results/results.hpp"
#include "core/results/run_folder.hpp"

namespace aisp {

namespace {

using json = nlohmann::json;

// A number, or empty for a missing or null field; anything else is a corrupt file.
std::optional<double> opt_number(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null())
    return std::nullopt;
  if (!obj.at(key).is_number())
    throw DataError(fmt::format("{}: \"{}\" is not a number", where, key));
  return obj.at(key).get<double>();
}

double number(const json& obj, const char* key, const std::string& where) {
  const auto v = opt_number(obj, key, where);
  if (!v)
    throw DataError(fmt::format("{}: no \"{}\"", where, key));
  return *v;
}

// p50/p99 of a distribution object such as "ttft_ms". A percentile of no completed request means
// nothing, so those read as empty.
std::optional<double> percentile(const json& summary, const char* dist, const char* p,
                                 int completed, const std::string& where) {
  if (completed == 0 || !summary.contains(dist) || !summary.at(dist).is_object())
    return std::nullopt;
  return opt_number(summary.at(dist), p, where + " " + dist);
}

LoadgenRun run_from_json(const json& r, const std::string& where) {
  if (!r.is_object() || !r.contains("summary") || !r.at("summary").is_object())
    throw DataError(where + ": no \"summary\" object");
  LoadgenRun run;
  const json& rate = r.value("rate", json());
  if (rate.is_number()) {
    run.rate = rate.get<double>();
    if (!std::isfinite(*run.rate))
      run.rate.reset();
  } else if (!(rate.is_string() && rate.get<std::string>() == "inf") && !rate.is_null()) {
    throw DataError(where + ": \"rate\" is neither a number nor \"inf\"");
  }
  run.max_concurrency = static_cast<int>(opt_number(r, "max_concurrency", where).value_or(0));
  const json& s = r.at("summary");
  const std::string sw = where + " summary";
  run.requests = static_cast<int>(number(s, "requests", sw));
  run.completed = static_cast<int>(number(s, "completed", sw));
  run.request_throughput = number(s, "request_throughput", sw);
  run.output_throughput = number(s, "output_throughput", sw);
  run.ttft_p50 = percentile(s, "ttft_ms", "p50", run.completed, sw);
  run.ttft_p99 = percentile(s, "ttft_ms", "p99", run.completed, sw);
  run.tpot_p50 = percentile(s, "tpot_ms", "p50", run.completed, sw);
  run.tpot_p99 = percentile(s, "tpot_ms", "p99", run.completed, sw);
  run.itl_p99 = percentile(s, "itl_ms", "p99", run.completed, sw);
  run.e2el_p50 = percentile(s, "e2el_ms", "p50", run.completed, sw);
  run.goodput = opt_number(s, "goodput", sw);
  if (s.contains("server_overhead") && s.at("server_overhead").is_object())
    run.server_overhead = opt_number(s.at("server_overhead"), "overhead_fraction", sw);
  return run;
}

std::string fixed(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : "-";
}

// The curve's point label: the load in few characters ("4/s", "c64", "4/s c64", "inf").
std::string short_load(const LoadgenRun& r) {
  std::string rate = r.rate ? fmt::format("{:g}/s", *r.rate) : "";
  if (r.max_concurrency > 0)
    return rate.empty() ? fmt::format("c{}", r.max_concurrency)
                        : fmt::format("{} c{}", rate, r.max_concurrency);
  return rate.empty() ? "inf" : rate;
}

std::string config_line(const LoadgenFile& f) {
  return fmt::format(
      "model {}, server {}; {} prompts, {} input / {} output tokens{}; goodput SLO: {}.",
      f.model.empty() ? "-" : f.model, f.url.empty() ? "-" : f.url, f.num_prompts,
      f.dataset.empty() ? std::to_string(f.input_len) : "dataset", f.output_len,
      f.dataset.empty() ? "" : " (dataset " + f.dataset + ")", f.slo_text);
}

std::string html_table(const TextTable& t) {
  std::string out = "<table class=\"serving\"><thead><tr>";
  for (const auto& h : t.header)
    out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& r : t.rows) {
    out += "<tr>";
    for (const auto& cell : r)
      out += "<td>" + html_escape(cell) + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

} // namespace

bool is_loadgen_text(const std::string& text) {
  const json doc = json::parse(text, nullptr, false);
  return doc.is_object() && doc.contains("schema") && doc.at("schema").is_string() &&
         doc.at("schema").get<std::string>() == k_loadgen_schema;
}

ReportInput classify_report_input(const std::string& path) {
  std::error_code ec;
  // A folder, a missing path or a results.json: load_run says what is wrong with it, if anything.
  if (!std::filesystem::is_regular_file(path, ec) ||
      std::filesystem::path(path).filename() == "results.json")
    return ReportInput::run;
  const json doc = json::parse(read_text_file(path), nullptr, false);
  std::string what;
  if (doc.is_discarded()) {
    what = "not JSON";
  } else if (!doc.is_object() || !doc.contains("schema") || !doc.at("schema").is_string()) {
    what = "a JSON file without a \"schema\" field";
  } else {
    const std::string schema = doc.at("schema").get<std::string>();
    if (schema == k_loadgen_schema)
      return ReportInput::loadgen;
    if (schema == k_results_schema_name)
      return ReportInput::run;
    what = fmt::format("a JSON file of schema \"{}\"", schema);
  }
  throw UsageError(
      fmt::format("{} is {}: aisp report takes run folders (or their results.json) and "
                  "aisp loadgen files (schema {})",
                  path, what, k_loadgen_schema));
}

LoadgenFile loadgen_from_text(const std::string& text, const std::string& path) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    throw DataError(path + ": not valid JSON");
  if (!doc.is_object() || !doc.contains("schema") || !doc.at("schema").is_string())
    throw DataError(path + ": no \"schema\" field (not an aisp loadgen file)");
  if (doc.at("schema").get<std::string>() != k_loadgen_schema)
    throw DataError(
        fmt::format("{}: schema {} is not {}", path, doc.at("schema").dump(), k_loadgen_schema));
  if (!doc.contains("runs") || !doc.at("runs").is_array())
    throw DataError(path + ": no \"runs\" array");
  LoadgenFile f;
  f.path = path;
  f.model = doc.value("model", "");
  f.url = doc.value("url", "");
  const json& cfg = doc.value("config", json::object());
  if (!cfg.is_object())
    throw DataError(path + ": \"config\" is not an object");
  f.num_prompts = static_cast<int>(opt_number(cfg, "num_prompts", path).value_or(0));
  f.input_len = static_cast<int>(opt_number(cfg, "input_len", path).value_or(0));
  f.output_len = static_cast<int>(opt_number(cfg, "output_len", path).value_or(0));
  if (cfg.contains("dataset") && cfg.at("dataset").is_string())
    f.dataset = cfg.at("dataset").get<std::string>();
  std::vector<std::string> slo;
  if (cfg.contains("slo_ms") && cfg.at("slo_ms").is_object()) {
    for (const char* k : {"ttft", "tpot", "e2el"}) {
      if (const auto v = opt_number(cfg.at("slo_ms"), k, path + " slo_ms"))
        slo.push_back(fmt::format("{} <= {:g} ms", k, *v));
    }
  }
  f.slo_text = slo.empty() ? "none" : fmt::format("{}", fmt::join(slo, ", "));
  for (std::size_t i = 0; i < doc.at("runs").size(); ++i)
    f.runs.push_back(run_from_json(doc.at("runs")[i], fmt::format("{} run {}", path, i + 1)));
  if (f.runs.empty())
    throw DataError(path + ": no runs");
  return f;
}

LoadgenFile load_loadgen_file(const std::string& path) {
  return loadgen_from_text(read_text_file(path), path);
}

std::string load_label(const LoadgenRun& r) {
  const std::string rate = r.rate ? fmt::format("rate {:g}/s", *r.rate) : "";
  if (r.max_concurrency > 0)
    return rate.empty() ? fmt::format("concurrency {}", r.max_concurrency)
                        : fmt::format("{}, concurrency {}", rate, r.max_concurrency);
  return rate.empty() ? "rate inf" : rate;
}

TextTable serving_table(const LoadgenFile& f) {
  const bool overhead = std::any_of(f.runs.begin(), f.runs.end(), [](const LoadgenRun& r) {
    return r.server_overhead.has_value();
  });
  TextTable t{{"load", "done", "in/out tokens", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
               "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "E2E p50 ms", "goodput req/s"},
              {}};
  if (overhead)
    t.header.push_back("server overhead");
  const std::string tokens = fmt::format(
      "{}/{}", f.dataset.empty() ? std::to_string(f.input_len) : "dataset", f.output_len);
  for (const auto& r : f.runs) {
    std::vector<std::string> row{load_label(r),
                                 fmt::format("{}/{}", r.completed, r.requests),
                                 tokens,
                                 fmt::format("{:.2f}", r.request_throughput),
                                 fmt::format("{:.0f}", r.output_throughput),
                                 fixed(r.ttft_p50, 1),
                                 fixed(r.ttft_p99, 1),
                                 fixed(r.tpot_p50, 2),
                                 fixed(r.tpot_p99, 2),
                                 fixed(r.itl_p99, 1),
                                 fixed(r.e2el_p50, 0),
                                 fixed(r.goodput, 2)};
    if (overhead)
      row.push_back(r.server_overhead ? fmt::format("{:.1f}%", *r.server_overhead * 100) : "-");
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::optional<SweepChart> serving_curve_of(const LoadgenFile& f) {
  std::vector<const LoadgenRun*> drawn;
  for (const auto& r : f.runs) {
    if (r.completed > 0)
      drawn.push_back(&r);
  }
  if (drawn.size() < 2)
    return std::nullopt;
  // Left to right by throughput, so that each line reads as the load rises.
  std::stable_sort(drawn.begin(), drawn.end(), [](const LoadgenRun* a, const LoadgenRun* b) {
    return a->output_throughput < b->output_throughput;
  });
  SweepChart c;
  c.title = (f.model.empty() ? "" : f.model + ": ") + "latency against output throughput";
  c.x_label = "output tokens/s";
  c.y_label = "latency (ms)";
  struct Line {
    const char* label;
    const char* colour;
    std::optional<double> LoadgenRun::*field;
    bool labelled; // TPOT p50 sits just under p99: one load label per pair is enough
  };
  // The per-token figures first: they are what a sweep trades against throughput.
  const Line lines[] = {{"TPOT p50", "#4e79a7", &LoadgenRun::tpot_p50, false},
                        {"TPOT p99", "#e15759", &LoadgenRun::tpot_p99, true},
                        {"TTFT p50", "#59a14f", &LoadgenRun::ttft_p50, true}};
  double lo = 0, hi = 0;
  for (const auto& line : lines) {
    SweepSeries s{line.label, "step", line.colour, {}};
    for (const auto* r : drawn) {
      const auto& y = r->*line.field;
      if (!y)
        continue;
      // Whole tokens/s: the axis labels stay readable and nothing real is lost.
      const double x = std::round(r->output_throughput);
      s.points.push_back({x, *y,
                          fmt::format("{}: {} {:.2f} ms at {:.0f} output tok/s", load_label(*r),
                                      line.label, *y, r->output_throughput),
                          line.labelled ? short_load(*r) : ""});
      lo = lo == 0 ? *y : std::min(lo, *y);
      hi = std::max(hi, *y);
      if (std::find(c.x_values.begin(), c.x_values.end(), x) == c.x_values.end())
        c.x_values.push_back(x);
    }
    if (s.points.empty())
      c.not_drawn.push_back(line.label);
    else
      c.series.push_back(std::move(s));
  }
  std::sort(c.x_values.begin(), c.x_values.end());
  // TTFT under load can be tens of times the TPOT: a log axis keeps the TPOT lines readable.
  c.y_log = lo > 0 && hi / lo > 8;
  return c;
}

std::string render_serving_html(const std::vector<LoadgenFile>& files) {
  if (files.empty())
    return {};
  std::string out = "<section id=\"serving\">\n<h2>Serving load tests</h2>\n"
                    "<p class=\"note\">aisp loadgen results (docs/serving.md): one row per offered "
                    "load. TTFT: time to first token; TPOT: time per output token after the first; "
                    "goodput: requests per second within the SLO; server overhead: the engine "
                    "server's busy time outside the model runner.</p>\n";
  for (const auto& f : files) {
    out += "<h3>" + html_escape(f.path) + "</h3>\n";
    out += "<p class=\"config\">" + html_escape(config_line(f)) + "</p>\n";
    out += html_table(serving_table(f)) + "\n";
    if (const auto curve = serving_curve_of(f)) {
      out += "<figure class=\"serving-curve\">" + render_sweep_svg(*curve) +
             "<figcaption>The latency-throughput curve: each point is one run of the file, "
             "labelled by its load; hover a point for its value.</figcaption></figure>\n";
    }
  }
  return out + "</section>\n";
}

std::string render_serving_markdown(const std::vector<LoadgenFile>& files) {
  if (files.empty())
    return {};
  std::string out = "## Serving load tests\n\n";
  for (const auto& f : files) {
    out += "### " + markdown_escape(f.path) + "\n\n" + config_line(f) + "\n\n";
    out += render_text_table(serving_table(f), OutputFormat::markdown) + "\n";
  }
  return out;
}

} // namespace aisp
