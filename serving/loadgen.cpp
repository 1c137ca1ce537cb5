#include "serving/loadgen.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <fmt/format.h>
#include <fstream>
#include <httplib.h>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "core/base/error.hpp"
#include "serving/metrics.hpp"

namespace aisp::serving {

using nlohmann::json;

// --- statistics ---

double percentile(std::vector<double> values, double p) {
  if (values.empty())
    return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Distribution distribution(const std::vector<double> &values) {
  Distribution d;
  d.count = values.size();
  if (values.empty())
    return d;
  const double n = static_cast<double>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double sq = 0;
  for (const double v : values)
    sq += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(sq / n);
  d.p50 = percentile(values, 50);
  d.p90 = percentile(values, 90);
  d.p99 = percentile(values, 99);
  d.max = *std::max_element(values.begin(), values.end());
  return d;
}

Summary summarize(const std::vector<RequestRecord> &records, double duration_s, const Slo &slo) {
  Summary s;
  s.requests = static_cast<int>(records.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const auto &r : records) {
    if (!r.success) {
      ++s.failed;
      ++s.errors[r.error.empty() ? "unknown" : r.error];
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    double request_tpot = 0; // vLLM: a request with one output token has TPOT 0 for goodput
    if (r.output_tokens > 1) {
      request_tpot = (r.e2e_s - r.ttft_s) / (r.output_tokens - 1);
      tpot.push_back(request_tpot * 1e3);
    }
    ttft.push_back(r.ttft_s * 1e3);
    e2el.push_back(r.e2e_s * 1e3);
    for (const double g : r.itl_s)
      itl.push_back(g * 1e3);
    const bool good = (!slo.ttft_ms || r.ttft_s * 1e3 <= *slo.ttft_ms) &&
                      (!slo.tpot_ms || request_tpot * 1e3 <= *slo.tpot_ms) &&
                      (!slo.e2el_ms || r.e2e_s * 1e3 <= *slo.e2el_ms);
    if (good)
      ++s.good;
  }
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / duration_s;
    if (slo.any())
      s.goodput = s.good / duration_s;
  }
  s.ttft_ms = distribution(ttft);
  s.tpot_ms = distribution(tpot);
  s.itl_ms = distribution(itl);
  s.e2el_ms = distribution(e2el);
  return s;
}

std::optional<double> ServerOverhead::fraction() const {
  if (steps <= 0 || !(runner_s > 0))
    return std::nullopt;
  return (busy_s - runner_s) / runner_s;
}

std::optional<ServerOverhead> overhead_between(const std::optional<EngineCounters> &before,
                                               const std::optional<EngineCounters> &after) {
  if (!before || !after)
    return std::nullopt;
  ServerOverhead o;
  o.runner_s = after->runner_s - before->runner_s;
  o.busy_s = after->busy_s - before->busy_s;
  o.steps = std::llround(after->steps - before->steps);
  return o;
}

namespace {

json distribution_json(const Distribution &d) {
  return json{{"count", d.count}, {"mean", d.mean}, {"std", d.std}, {"p50", d.p50},
              {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

json overhead_json(const ServerOverhead &o) {
  const auto per_step_ms = [&](double seconds) {
    return o.steps > 0 ? json(seconds / static_cast<double>(o.steps) * 1e3) : json(nullptr);
  };
  const auto f = o.fraction();
  return json{{"runner_s", o.runner_s},
              {"busy_s", o.busy_s},
              {"steps", o.steps},
              {"mean_runner_step_ms", per_step_ms(o.runner_s)},
              {"mean_overhead_step_ms", per_step_ms(o.busy_s - o.runner_s)},
              {"overhead_fraction", f ? json(*f) : json(nullptr)}};
}

} // namespace

json summary_json(const Summary &s) {
  json j{{"requests", s.requests},
         {"completed", s.completed},
         {"failed", s.failed},
         {"duration_s", s.duration_s},
         {"input_tokens", s.input_tokens},
         {"output_tokens", s.output_tokens},
         {"request_throughput", s.request_throughput},
         {"output_throughput", s.output_throughput},
         {"total_token_throughput", s.total_token_throughput},
         {"good_requests", s.good},
         {"goodput", s.goodput ? json(*s.goodput) : json(nullptr)},
         {"ttft_ms", distribution_json(s.ttft_ms)},
         {"tpot_ms", distribution_json(s.tpot_ms)},
         {"itl_ms", distribution_json(s.itl_ms)},
         {"e2el_ms", distribution_json(s.e2el_ms)},
         {"errors", s.errors}};
  if (s.server_overhead)
    j["server_overhead"] = overhead_json(*s.server_overhead);
  return j;
}

std::string summary_table(const Summary &s, const std::string &title) {
  std::string out = fmt::format("{:=^60}\n", " " + title + " ");
  const auto row = [&](const std::string &name, const std::string &value) {
    out += fmt::format("{:<44}{:>16}\n", name, value);
  };
  row("Successful requests:", std::to_string(s.completed));
  row("Failed requests:", std::to_string(s.failed));
  row("Benchmark duration (s):", fmt::format("{:.2f}", s.duration_s));
  row("Total input tokens:", std::to_string(s.input_tokens));
  row("Total generated tokens:", std::to_string(s.output_tokens));
  row("Request throughput (req/s):", fmt::format("{:.2f}", s.request_throughput));
  if (s.goodput)
    row("Request goodput (req/s):", fmt::format("{:.2f}", *s.goodput));
  row("Output token throughput (tok/s):", fmt::format("{:.2f}", s.output_throughput));
  row("Total token throughput (tok/s):", fmt::format("{:.2f}", s.total_token_throughput));
  const auto block = [&](const std::string &heading, const std::string &name,
                         const Distribution &d) {
    out += fmt::format("{:-^60}\n", heading);
    row(fmt::format("Mean {} (ms):", name), fmt::format("{:.2f}", d.mean));
    row(fmt::format("P50 {} (ms):", name), fmt::format("{:.2f}", d.p50));
    row(fmt::format("P90 {} (ms):", name), fmt::format("{:.2f}", d.p90));
    row(fmt::format("P99 {} (ms):", name), fmt::format("{:.2f}", d.p99));
  };
  block("Time to First Token", "TTFT", s.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  block("Inter-token Latency", "ITL", s.itl_ms);
  block("End-to-end Latency", "E2EL", s.e2el_ms);
  if (const auto &o = s.server_overhead) {
    out += fmt::format("{:-^60}\n", "Server path (engine counters)");
    row("Engine steps:", std::to_string(o->steps));
    if (o->steps > 0) {
      row("Mean runner step (ms):", fmt::format("{:.3f}", o->runner_s / o->steps * 1e3));
      row("Mean server overhead per step (ms):",
          fmt::format("{:.3f}", (o->busy_s - o->runner_s) / o->steps * 1e3));
    }
    if (const auto f = o->fraction())
      row("Server overhead (busy - runner) / runner:", fmt::format("{:.2f}%", *f * 100));
  }
  out += std::string(60, '=') + '\n';
  return out;
}

std::string failure_line(const Summary &s) {
  if (s.failed == 0)
    return "";
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto &[why, n] : s.errors)
    reasons.emplace_back(n, why);
  std::sort(reasons.rbegin(), reasons.rend());
  std::string out = fmt::format("{} failed:", s.failed);
  for (std::size_t i = 0; i < reasons.size(); ++i)
    out += fmt::format("{} {} x {}", i ? "," : "", reasons[i].first, reasons[i].second);
  return out;
}

// --- workload ---

std::vector<Prompt> random_prompts(int n, int input_len, int output_len, int vocab_low,
                                   int vocab_high, std::uint64_t seed) {
  if (n <= 0 || input_len <= 0 || output_len <= 0)
    throw UsageError("--num-prompts, --input-len and --output-len must be positive");
  if (vocab_low < 0 || vocab_low >= vocab_high)
    throw UsageError(fmt::format("empty token range [{}, {}): check --vocab-low and --vocab",
                                 vocab_low, vocab_high));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenId> id(vocab_low, vocab_high - 1);
  std::vector<Prompt> out(static_cast<std::size_t>(n));
  for (auto &p : out) {
    p.ids.resize(static_cast<std::size_t>(input_len));
    for (auto &t : p.ids)
      t = id(rng);
    p.output_len = output_len;
  }
  return out;
}

namespace {

int approx_tokens(const std::string &text) {
  // Characters (UTF-8 code points) / 4: the usual rule of thumb for English under BPE tokenizers.
  const auto chars =
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; });
  return static_cast<int>(std::lround(static_cast<double>(chars) / 4.0));
}

} // namespace

std::vector<Prompt> load_dataset(const std::string &path, int n, int output_len, int vocab_low,
                                 int vocab_high, int max_context, std::uint64_t seed) {
  std::ifstream in(path);
  if (!in)
    throw UsageError(fmt::format("cannot read dataset {}", path));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception &e) {
    throw DataError(fmt::format("dataset {} is not JSON: {}", path, e.what()));
  }
  if (!doc.is_array())
    throw DataError(fmt::format("dataset {}: expected a JSON list of conversations", path));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenId> id(vocab_low, vocab_high - 1);
  std::vector<Prompt> all;
  for (const auto &entry : doc) {
    Prompt p;
    if (!entry.is_object())
      continue;
    if (entry.contains("prompt_token_ids")) { // pre-tokenized: taken as is, not filtered by length
      try {
        p.ids = entry.at("prompt_token_ids").get<std::vector<TokenId>>();
        p.output_len = entry.value("output_len", 0);
      } catch (const json::exception &e) {
        throw DataError(fmt::format("dataset {}: bad pre-tokenized entry: {}", path, e.what()));
      }
      if (output_len > 0)
        p.output_len = output_len;
      if (p.ids.empty() || p.output_len <= 0)
        continue;
    } else {
      const auto it = entry.find("conversations");
      if (it == entry.end() || !it->is_array() || it->size() < 2)
        continue;
      const auto &turns = *it;
      if (!turns[0].contains("value") || !turns[1].contains("value") ||
          !turns[0]["value"].is_string() || !turns[1]["value"].is_string())
        continue;
      const int prompt_len = approx_tokens(turns[0]["value"].get<std::string>());
      const int completion_len =
          output_len > 0 ? output_len : approx_tokens(turns[1]["value"].get<std::string>());
      // vLLM's ShareGPT filter: too short to be meaningful, or too long for a 2048-token model.
      if (prompt_len < 4 || (output_len <= 0 && completion_len < 4))
        continue;
      if (prompt_len > 1024 || prompt_len + completion_len > 2048)
        continue;
      p.ids.resize(static_cast<std::size_t>(prompt_len));
      for (auto &t : p.ids)
        t = id(rng);
      p.output_len = completion_len;
    }
    if (max_context > 0 && static_cast<int>(p.ids.size()) + p.output_len > max_context)
      continue;
    all.push_back(std::move(p));
  }
  if (all.empty())
    throw DataError(fmt::format("dataset {}: no usable entries", path));
  std::shuffle(all.begin(), all.end(), rng);
  if (static_cast<int>(all.size()) > n)
    all.resize(static_cast<std::size_t>(n));
  return all;
}

std::vector<double> arrival_times(int n, double rate, std::uint64_t seed) {
  std::vector<double> t(static_cast<std::size_t>(std::max(0, n)), 0.0);
  if (!(rate > 0) || std::isinf(rate))
    return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (std::size_t i = 1; i < t.size(); ++i)
    t[i] = t[i - 1] + gap(rng);
  return t;
}

// --- client ---

ServerInfo probe_server(const std::string &url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    throw UsageError(fmt::format("bad --url '{}' (expected http://host:port)", url));
  httplib::Client cli(url);
  if (!cli.is_valid())
    throw UsageError(fmt::format("bad --url '{}' (expected http://host:port)", url));
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  const auto r = cli.Get("/v1/models");
  if (!r)
    throw UsageError(fmt::format("cannot reach {}: {}", url, httplib::to_string(r.error())));
  if (r->status != 200)
    throw UsageError(fmt::format("{} answered HTTP {} to GET /v1/models", url, r->status));
  ServerInfo info;
  try {
    const auto j = json::parse(r->body);
    const auto &m = j.at("data").at(0);
    info.model = m.at("id").get<std::string>();
    info.vocab_size = m.value("vocab_size", 0);
    info.max_model_len = m.value("max_model_len", 0);
  } catch (const json::exception &e) {
    throw UsageError(
        fmt::format("{}: GET /v1/models is not an OpenAI model list ({})", url, e.what()));
  }
  return info;
}

std::optional<EngineCounters> scrape_engine_counters(const std::string &url) {
  httplib::Client cli(url);
  if (!cli.is_valid())
    return std::nullopt;
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  const auto r = cli.Get("/metrics");
  if (!r || r->status != 200)
    return std::nullopt;
  try {
    // The strict parser: a server whose text it rejects has none of aisp's counters anyway.
    const auto m = parse_prometheus_text(r->body);
    EngineCounters c;
    c.runner_s = m.value("aisp_engine_runner_seconds_total");
    c.busy_s = m.value("aisp_engine_busy_seconds_total");
    c.steps = m.value("aisp_engine_steps_total");
    return c;
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

bool SseParser::feed(const char *data, std::size_t size, double now_s) {
  m_buffer.append(data, size);
  // Events end with a blank line; "\r\n" line ends are legal SSE too.
  for (;;) {
    std::size_t end = m_buffer.find("\n\n");
    std::size_t skip = 2;
    if (const auto crlf = m_buffer.find("\r\n\r\n"); crlf != std::string::npos && crlf < end) {
      end = crlf;
      skip = 4;
    }
    if (end == std::string::npos)
      break;
    const std::string block = m_buffer.substr(0, end);
    m_buffer.erase(0, end + skip);
    std::string payload;
    std::size_t pos = 0;
    while (pos <= block.size()) {
      auto eol = block.find('\n', pos);
      if (eol == std::string::npos)
        eol = block.size();
      std::string line = block.substr(pos, eol - pos);
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (line.rfind("data:", 0) == 0) {
        line.erase(0, 5);
        if (!line.empty() && line[0] == ' ')
          line.erase(0, 1);
        payload += line;
      } // comments (":...") and other fields carry no tokens
      pos = eol + 1;
    }
    if (!payload.empty())
      event(payload, now_s);
    if (m_done || !m_error.empty())
      return false;
  }
  return true;
}

void SseParser::event(const std::string &payload, double now_s) {
  if (payload == "[DONE]") {
    m_done = true;
    m_done_time = now_s;
    return;
  }
  json j;
  try {
    j = json::parse(payload);
  } catch (const json::exception &) {
    m_error = "malformed stream chunk";
    return;
  }
  if (j.contains("error")) {
    m_error = "stream error: " + j["error"].value("message", std::string("?"));
    return;
  }
  if (j.contains("usage") && j["usage"].is_object())
    m_usage = j["usage"].value("completion_tokens", 0);
  const auto it = j.find("choices");
  if (it == j.end() || !it->is_array() || it->empty())
    return;
  const auto &c = it->front();
  // aisp sends ids; other OpenAI servers (vLLM) send text, one chunk per step.
  int n = 0;
  if (c.contains("token_ids") && c["token_ids"].is_array()) {
    n = static_cast<int>(c["token_ids"].size());
    for (const auto &id : c["token_ids"])
      m_token_ids.push_back(id.is_number_integer() ? id.get<TokenId>() : -1);
  } else if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty())
    n = 1;
  if (n == 0)
    return;
  m_tokens += n;
  m_token_times.push_back(now_s);
}

namespace {

using Clock = std::chrono::steady_clock;

RequestRecord send_one(httplib::Client &cli, const Prompt &p, const std::string &model,
                       Clock::time_point t0) {
  RequestRecord rec;
  rec.prompt_tokens = static_cast<int>(p.ids.size());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = json{
      {"model", model},
      {"prompt", p.ids},
      {"max_tokens", p.output_len},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"ignore_eos", true},
      {"temperature",
       0}}.dump();
  SseParser sse;
  int status = 0;
  std::string error_body;
  const auto send = Clock::now();
  const auto since_send = [&] {
    return std::chrono::duration<double>(Clock::now() - send).count();
  };
  req.response_handler = [&](const httplib::Response &r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char *data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
      return true;
    }
    sse.feed(data, n, since_send());
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  const double end = since_send();
  rec.send_s = std::chrono::duration<double>(send - t0).count();
  if (!sent) {
    rec.error = httplib::to_string(err);
  } else if (status != 200) {
    std::string message;
    try {
      message = json::parse(error_body).at("error").value("message", "");
    } catch (const json::exception &) {
      message = error_body.substr(0, 80);
    }
    rec.error = fmt::format("HTTP {}: {}", status, message);
  } else if (!sse.error().empty()) {
    rec.error = sse.error();
  } else if (!sse.done() || sse.token_times().empty()) {
    rec.error = sse.done() ? "no token in the stream" : "stream ended before [DONE]";
  } else {
    rec.success = true;
    const auto &times = sse.token_times();
    rec.ttft_s = times.front();
    for (std::size_t i = 1; i < times.size(); ++i)
      rec.itl_s.push_back(times[i] - times[i - 1]);
    rec.e2e_s = sse.done_time() > 0 ? sse.done_time() : end;
    rec.output_tokens = sse.usage_completion_tokens().value_or(sse.tokens());
    rec.token_ids = sse.token_ids();
  }
  return rec;
}

} // namespace

LoadResult run_load(const LoadOptions &options, const std::vector<Prompt> &prompts) {
  // httplib's client writes with plain send(): a server that closes mid-request would raise
  // SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  LoadResult result;
  const int n = static_cast<int>(prompts.size());
  result.records.resize(prompts.size());
  const auto arrivals = arrival_times(n, options.rate, options.seed ^ 0x9e3779b97f4a7c15ULL);
  const int cap = options.max_concurrency > 0 ? std::min(options.max_concurrency, n) : n;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<int> ready;
  bool closed = false;
  bool all_sent = false; // every request was handed to the queue
  int idle = 0;
  std::atomic<int> finished{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> workers;
  // Just before the first send and (below) just after the last worker is gone, so that the deltas
  // hold this run's steps and nothing of the run's outside (the engine idles between runs).
  const auto before =
      options.scrape_metrics ? scrape_engine_counters(options.url) : std::nullopt;
  const auto t0 = Clock::now();

  const auto worker = [&] {
    // One keep-alive connection per worker, reused for its next request.
    httplib::Client cli(options.url);
    cli.set_keep_alive(true);
    // httplib writes a request's headers and body separately: with Nagle on, the body waits for the
    // server's delayed ACK of the headers, adding ~40 ms to every TTFT on Linux.
    cli.set_tcp_nodelay(true);
    cli.set_connection_timeout(10);
    cli.set_read_timeout(options.request_timeout_s);
    cli.set_write_timeout(options.request_timeout_s);
    for (;;) {
      int index = -1;
      {
        std::unique_lock lock(mutex);
        ++idle;
        cv.wait(lock, [&] { return !ready.empty() || closed || all_sent; });
        --idle;
        // Out of work: close the connection now, so that the server's thread serving it is free for
        // the connections still waiting (a server serves as many connections as it has threads).
        if (ready.empty())
          return;
        index = ready.front();
        ready.pop_front();
      }
      auto rec = send_one(cli, prompts[static_cast<std::size_t>(index)], options.model, t0);
      {
        // Under the lock: the waiters' predicates read these.
        const std::lock_guard lock(mutex);
        if (!rec.success)
          ++failed;
        result.records[static_cast<std::size_t>(index)] = std::move(rec);
        ++finished;
      }
      cv.notify_all();
    }
  };

  std::thread progress;
  if (options.progress_every_s > 0) {
    progress = std::thread([&] {
      std::unique_lock lock(mutex);
      const auto every = std::chrono::duration<double>(options.progress_every_s);
      while (!cv.wait_for(lock, every, [&] { return finished == n; }))
        std::fprintf(stderr, "loadgen: %d/%d done (%d failed), %.1f s\n", finished.load(), n,
                     failed.load(), std::chrono::duration<double>(Clock::now() - t0).count());
    });
  }
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<Clock::duration>(
                 std::chrono::duration<double>(arrivals[static_cast<std::size_t>(i)])));
    const std::lock_guard lock(mutex);
    ready.push_back(i);
    // A request that finds no idle worker gets a new one, up to the concurrency cap; beyond it, it
    // waits.
    if (static_cast<int>(ready.size()) > idle && static_cast<int>(workers.size()) < cap)
      workers.emplace_back(worker);
    cv.notify_one();
  }
  {
    const std::lock_guard lock(mutex);
    all_sent = true;
  }
  cv.notify_all();
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return finished == n; });
    closed = true;
  }
  result.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  cv.notify_all();
  for (auto &w : workers)
    w.join();
  if (progress.joinable())
    progress.join();
  if (before) {
    // The engine publishes a step's times just after that step's last token went out
    // (engine_loop.cpp): read again until two reads agree (the engine idles after the run).
    auto after = scrape_engine_counters(options.url);
    for (int i = 0; i < 5 && after; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto again = scrape_engine_counters(options.url);
      if (!again || (again->busy_s == after->busy_s && again->steps == after->steps))
        break;
      after = again;
    }
    result.server_overhead = overhead_between(before, after);
  }
  return result;
}

} // namespace aisp::serving
