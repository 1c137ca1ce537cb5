// The load generator behind `aisp loadgen`: a workload (random token-id prompts or a ShareGPT
// file), an arrival process (Poisson at a rate, all at once, at most C in flight), a client that
// streams each completion and timestamps every token chunk, and the statistics vLLM's
// benchmarks/benchmark_serving.py reports (TTFT, TPOT, ITL, E2EL, throughputs, goodput), with the
// same definitions (docs/serving.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serving/runner_api.hpp"

namespace aisp::serving {

// One request as the client saw it. Times in seconds.
struct RequestRecord {
  bool success = false;
  std::string error; // why it failed: "HTTP 429: ...", "Connection", ...
  int prompt_tokens = 0;
  int output_tokens = 0;     // the usage chunk's completion_tokens, else the ids received
  double send_s = 0;         // when it was sent, from the start of the run
  double ttft_s = 0;         // send to the first chunk carrying a token
  double e2e_s = 0;          // send to the end of the response ([DONE])
  std::vector<double> itl_s; // gaps between consecutive chunks carrying tokens
  // The generated ids, in order, from aisp servers' "token_ids" (empty for servers that send text):
  // what a ladder judges when its load goes through HTTP (ch17:routing).
  std::vector<TokenId> token_ids;
};

// Service-level objectives in milliseconds; a request meets them when every one given holds.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  [[nodiscard]] bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// numpy.percentile's default (linear interpolation between closest ranks); 0 for no values, as
// vLLM.
[[nodiscard]] double percentile(std::vector<double> values, double p);

struct Distribution {
  std::size_t count = 0;
  double mean = 0, std = 0, p50 = 0, p90 = 0, p99 = 0, max = 0; // std: population (numpy's default)
};
[[nodiscard]] Distribution distribution(const std::vector<double> &values);

// The engine's own cumulative counters, read from an aisp server's /metrics
// (aisp_engine_runner_seconds_total, aisp_engine_busy_seconds_total, aisp_engine_steps_total).
struct EngineCounters {
  double runner_s = 0;
  double busy_s = 0;
  double steps = 0;
};
// GET /metrics: nullopt when the server does not answer it or lacks one of the three counters
// (vLLM, SGLang, the fake engine): the overhead is then silently left out.
[[nodiscard]] std::optional<EngineCounters> scrape_engine_counters(const std::string &url);

// The server path's own overhead over one run: the counters' deltas between a scrape just before
// the run and one just after. busy = runner + the host work the server adds around each step
// (scheduling, token delivery; serving/engine_loop.cpp defines both), so overhead = (busy - runner)
// / runner. Anything else the server ran meanwhile (another client) is counted too.
struct ServerOverhead {
  double runner_s = 0;
  double busy_s = 0;
  std::int64_t steps = 0;
  [[nodiscard]] std::optional<double> fraction() const; // none when no step ran
};
// nullopt unless both scrapes succeeded.
[[nodiscard]] std::optional<ServerOverhead>
overhead_between(const std::optional<EngineCounters> &before,
                 const std::optional<EngineCounters> &after);

struct Summary {
  int requests = 0;
  int completed = 0;
  int failed = 0;
  double duration_s = 0;
  std::int64_t input_tokens = 0; // completed requests only
  std::int64_t output_tokens = 0;
  double request_throughput = 0;     // completed / duration
  double output_throughput = 0;      // output tokens / duration
  double total_token_throughput = 0; // (input + output tokens) / duration
  int good = 0;                      // completed requests meeting every SLO given
  std::optional<double> goodput;     // good / duration, when an SLO was given
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms;
  std::map<std::string, int> errors; // failure reason -> count
  // Not from the records: the caller copies LoadResult::server_overhead here so that the table and
  // the JSON show it; absent for servers without the counters.
  std::optional<ServerOverhead> server_overhead;
};
// vLLM's calculate_metrics: TPOT = (e2e - ttft) / (output_tokens - 1) over requests with more than
// one output token; ITL pooled over every completed request; for goodput a one-token request's TPOT
// is 0.
[[nodiscard]] Summary summarize(const std::vector<RequestRecord> &records, double duration_s,
                                const Slo &slo);
[[nodiscard]] nlohmann::json summary_json(const Summary &s);
[[nodiscard]] std::string summary_table(const Summary &s, const std::string &title);
// One line per failure reason: "3 failed: 2 x HTTP 429 (...), 1 x Connection".
[[nodiscard]] std::string failure_line(const Summary &s);

// --- workload ---
struct Prompt {
  std::vector<TokenId> ids;
  int output_len = 0;
};
// `n` prompts of `input_len` ids drawn uniformly from [vocab_low, vocab_high), seeded.
[[nodiscard]] std::vector<Prompt> random_prompts(int n, int input_len, int output_len,
                                                 int vocab_low, int vocab_high, std::uint64_t seed);
// A ShareGPT file (a JSON list of {"conversations": [{"from": "human", "value"}, {"from": "gpt",
// ...}]}) or its pre-tokenized variant ({"prompt_token_ids": [...], "output_len": N} entries).
// Without a tokenizer a turn's length is its characters / 4 (documented); ids are random in
// [vocab_low, vocab_high). Filters as vLLM's sampler does (lengths < 4, prompt > 1024, prompt +
// output > 2048, > max_context), shuffles with `seed` and keeps `n`. `output_len` > 0 overrides
// every entry's output length.
[[nodiscard]] std::vector<Prompt> load_dataset(const std::string &path, int n, int output_len,
                                               int vocab_low, int vocab_high, int max_context,
                                               std::uint64_t seed);
// Send times from the start (seconds): exponential gaps at `rate` per second (a Poisson process),
// seeded; all zero for an infinite rate. The first request goes at 0.
[[nodiscard]] std::vector<double> arrival_times(int n, double rate, std::uint64_t seed);

// --- client ---
struct ServerInfo {
  std::string model;
  int vocab_size = 0; // 0: the server does not say (not an aisp server)
  int max_model_len = 0;
};
// GET /v1/models; throws aisp::UsageError with one line when the server cannot be reached or
// answers something else than a model list.
[[nodiscard]] ServerInfo probe_server(const std::string &url);

// Incremental parser of a completion's server-sent events, fed the bytes as they arrive.
class SseParser {
public:
  // `now_s`: when these bytes arrived. Returns false once the stream is finished or failed.
  bool feed(const char *data, std::size_t size, double now_s);
  [[nodiscard]] bool done() const { return m_done; }
  [[nodiscard]] const std::string &error() const { return m_error; }
  [[nodiscard]] const std::vector<double> &token_times() const {
    return m_token_times;
  } // per chunk
  [[nodiscard]] int tokens() const { return m_tokens; }
  // The ids of aisp's "token_ids" arrays, in order (none from servers that send text).
  [[nodiscard]] const std::vector<TokenId> &token_ids() const { return m_token_ids; }
  [[nodiscard]] std::optional<int> usage_completion_tokens() const { return m_usage; }
  [[nodiscard]] double done_time() const { return m_done_time; }

private:
  void event(const std::string &payload, double now_s);
  std::string m_buffer;
  bool m_done = false;
  std::string m_error;
  std::vector<double> m_token_times;
  int m_tokens = 0;
  std::vector<TokenId> m_token_ids;
  std::optional<int> m_usage;
  double m_done_time = 0;
};

struct LoadOptions {
  std::string url; // http://host:port
  std::string model;
  double rate = 0;         // requests per second; <= 0 or inf: all at once
  int max_concurrency = 0; // at most this many in flight; 0: no limit
  int request_timeout_s = 600;
  std::uint64_t seed = 0;
  double progress_every_s = 5; // progress lines on stderr; 0: none
  bool scrape_metrics = true;  // read /metrics before and after the run (server_overhead)
};
struct LoadResult {
  std::vector<RequestRecord> records; // in the prompts' order
  double duration_s = 0;              // first send to last response
  std::optional<ServerOverhead> server_overhead;
};
[[nodiscard]] LoadResult run_load(const LoadOptions &options, const std::vector<Prompt> &prompts);

} // namespace aisp::serving
