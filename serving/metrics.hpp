// Prometheus text exposition (format 0.0.4): a thread-safe histogram, a writer that renders
// counters, gauges and histograms with their # HELP / # TYPE lines, and a strict parser of the same
// text (the tests read /metrics back with it; a scraper's rules: names, label syntax, cumulative
// buckets ending in +Inf). Reference: https://prometheus.io/docs/instrumenting/exposition_formats/
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace aisp::serving {

// Fixed upper bounds (seconds), counts per bucket, sum and count; observe() is safe from any
// thread.
class Histogram {
public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;      // without +Inf
    std::vector<std::uint64_t> cumulative; // one per bound, then +Inf (== count)
    double sum = 0.0;
    std::uint64_t count = 0;
  };
  [[nodiscard]] Snapshot snapshot() const;

private:
  mutable std::mutex m_mutex;
  std::vector<double> m_bounds;
  std::vector<std::uint64_t> m_counts; // per bucket (not cumulative), last = above every bound
  double m_sum = 0.0;
  std::uint64_t m_count = 0;
};

// Bucket bounds (seconds) for the serving latencies, finer at the low end than vLLM's own because
// an H100 decodes a small model's token in a few milliseconds.
std::vector<double> ttft_buckets();
std::vector<double> tpot_buckets();
std::vector<double> e2e_buckets();
std::vector<double> queue_buckets();

// A label set as name/value pairs, rendered in the given order: {outcome="length"}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusWriter {
public:
  void counter(const std::string &name, const std::string &help, double value,
               const Labels &labels = {});
  // Several label sets of one counter family under one # TYPE line.
  void counter_family(const std::string &name, const std::string &help,
                      const std::vector<std::pair<Labels, double>> &samples);
  void gauge(const std::string &name, const std::string &help, double value,
             const Labels &labels = {});
  // Several label sets of one gauge family under one # TYPE line.
  void gauge_family(const std::string &name, const std::string &help,
                    const std::vector<std::pair<Labels, double>> &samples);
  void histogram(const std::string &name, const std::string &help, const Histogram::Snapshot &h);
  [[nodiscard]] const std::string &text() const { return m_text; }

private:
  void family(const std::string &name, const std::string &help, const char *type);
  void sample(const std::string &name, const Labels &labels, double value);
  std::string m_text;
};

// Parsed exposition: every sample keyed by its series as written ("name{a=\"b\"}", labels in the
// order written), and each family's type. Throws std::runtime_error naming the line on anything a
// Prometheus scraper would reject, or a histogram whose buckets are not cumulative or whose +Inf !=
// _count.
struct ParsedMetrics {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types; // family name -> counter | gauge | histogram | ...
  [[nodiscard]] double value(const std::string &series) const; // throws when absent
};
[[nodiscard]] ParsedMetrics parse_prometheus_text(const std::string &text);

} // namespace aisp::serving
