#include "serving/metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace aisp::serving {

Histogram::Histogram(std::vector<double> upper_bounds)
    : m_bounds(std::move(upper_bounds)), m_counts(m_bounds.size() + 1, 0) {
  if (!std::is_sorted(m_bounds.begin(), m_bounds.end()) ||
      std::adjacent_find(m_bounds.begin(), m_bounds.end()) != m_bounds.end())
    throw std::invalid_argument("histogram bounds must be strictly increasing");
}

void Histogram::observe(double value) {
  // Prometheus buckets are "less than or equal": a value on a bound belongs to that bound's bucket.
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(m_bounds.begin(), m_bounds.end(), value) - m_bounds.begin());
  const std::lock_guard lock(m_mutex);
  ++m_counts[bucket];
  m_sum += value;
  ++m_count;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  const std::lock_guard lock(m_mutex);
  s.upper_bounds = m_bounds;
  std::uint64_t running = 0;
  for (const auto c : m_counts) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = m_sum;
  s.count = m_count;
  return s;
}

std::vector<double> ttft_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
}
std::vector<double> tpot_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04,
          0.05,   0.075, 0.1,    0.15,  0.2,    0.3,  0.5,   1.0,  2.5};
}
std::vector<double> e2e_buckets() {
  return {0.01, 0.025, 0.05, 0.1,  0.25, 0.5,  1.0,   2.5,   5.0,   10.0,
          15.0, 20.0,  30.0, 60.0, 120., 240., 480.0, 960.0, 1920.0};
}
std::vector<double> queue_buckets() {
  return {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0};
}

namespace {

std::string format_value(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{}", v); // shortest round-trip representation
}

std::string escape_label(const std::string &v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string render_labels(const Labels &labels) {
  if (labels.empty())
    return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i)
      out += ',';
    out += labels[i].first + "=\"" + escape_label(labels[i].second) + '"';
  }
  return out + '}';
}

} // namespace

void PrometheusWriter::family(const std::string &name, const std::string &help, const char *type) {
  m_text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusWriter::sample(const std::string &name, const Labels &labels, double value) {
  m_text += name + render_labels(labels) + ' ' + format_value(value) + '\n';
}

void PrometheusWriter::counter(const std::string &name, const std::string &help, double value,
                               const Labels &labels) {
  family(name, help, "counter");
  sample(name, labels, value);
}

void PrometheusWriter::counter_family(const std::string &name, const std::string &help,
                                      const std::vector<std::pair<Labels, double>> &samples) {
  family(name, help, "counter");
  for (const auto &[labels, value] : samples)
    sample(name, labels, value);
}

void PrometheusWriter::gauge(const std::string &name, const std::string &help, double value,
                             const Labels &labels) {
  family(name, help, "gauge");
  sample(name, labels, value);
}

void PrometheusWriter::gauge_family(const std::string &name, const std::string &help,
                                    const std::vector<std::pair<Labels, double>> &samples) {
  family(name, help, "gauge");
  for (const auto &[labels, value] : samples)
    sample(name, labels, value);
}

void PrometheusWriter::histogram(const std::string &name, const std::string &help,
                                 const Histogram::Snapshot &h) {
  family(name, help, "histogram");
  for (std::size_t i = 0; i < h.upper_bounds.size(); ++i)
    sample(name + "_bucket", {{"le", format_value(h.upper_bounds[i])}},
           static_cast<double>(h.cumulative[i]));
  sample(name + "_bucket", {{"le", "+Inf"}}, static_cast<double>(h.count));
  sample(name + "_sum", {}, h.sum);
  sample(name + "_count", {}, static_cast<double>(h.count));
}

double ParsedMetrics::value(const std::string &series) const {
  const auto it = samples.find(series);
  if (it == samples.end())
    throw std::runtime_error("no sample " + series);
  return it->second;
}

namespace {

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool name_char(char c) { return name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

double parse_number(const std::string &s, const std::string &line) {
  if (s == "+Inf" || s == "Inf")
    return INFINITY;
  if (s == "-Inf")
    return -INFINITY;
  if (s == "NaN")
    return NAN;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    throw std::runtime_error("bad value in line: " + line);
  return v;
}

// The family a sample belongs to: histograms' _bucket/_sum/_count series belong to the base name.
std::string family_of(const std::string &name, const std::map<std::string, std::string> &types) {
  for (const char *suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const auto base = name.substr(0, name.size() - s.size());
      const auto it = types.find(base);
      if (it != types.end() && (it->second == "histogram" || it->second == "summary"))
        return base;
    }
  }
  return name;
}

void check_histograms(const ParsedMetrics &m) {
  for (const auto &[family, type] : m.types) {
    if (type != "histogram")
      continue;
    // Buckets in the order written are the bounds' order (std::map sorts the strings, so re-sort).
    std::vector<std::pair<double, double>> buckets;
    const std::string prefix = family + "_bucket{le=\"";
    for (const auto &[series, v] : m.samples)
      if (series.rfind(prefix, 0) == 0)
        buckets.emplace_back(
            parse_number(series.substr(prefix.size(), series.size() - prefix.size() - 2), series),
            v);
    std::sort(buckets.begin(), buckets.end());
    if (buckets.empty() || !std::isinf(buckets.back().first))
      throw std::runtime_error("histogram " + family + " has no +Inf bucket");
    for (std::size_t i = 1; i < buckets.size(); ++i)
      if (buckets[i].second < buckets[i - 1].second)
        throw std::runtime_error("histogram " + family + " buckets are not cumulative");
    if (buckets.back().second != m.value(family + "_count"))
      throw std::runtime_error("histogram " + family + ": +Inf bucket != _count");
    (void)m.value(family + "_sum");
  }
}

} // namespace

ParsedMetrics parse_prometheus_text(const std::string &text) {
  ParsedMetrics m;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      throw std::runtime_error("exposition does not end with a newline");
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty())
      continue;
    if (line[0] == '#') {
      if (line.rfind("# TYPE ", 0) == 0) {
        const auto rest = line.substr(7);
        const auto sp = rest.find(' ');
        if (sp == std::string::npos)
          throw std::runtime_error("bad TYPE line: " + line);
        const auto type = rest.substr(sp + 1);
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped")
          throw std::runtime_error("unknown type in line: " + line);
        if (!m.types.emplace(rest.substr(0, sp), type).second)
          throw std::runtime_error("second TYPE line for a family: " + line);
      }
      continue;
    }
    std::size_t i = 0;
    if (!name_start(line[0]))
      throw std::runtime_error("bad metric name in line: " + line);
    while (i < line.size() && name_char(line[i]))
      ++i;
    const std::string name = line.substr(0, i);
    std::string series = name;
    if (i < line.size() && line[i] == '{') {
      const auto close = line.find('}', i);
      if (close == std::string::npos)
        throw std::runtime_error("unclosed labels in line: " + line);
      // label="value" pairs, comma separated; values are escaped strings.
      std::size_t j = i + 1;
      while (j < close) {
        const auto eq = line.find('=', j);
        if (eq == std::string::npos || eq > close || eq == j || !name_start(line[j]))
          throw std::runtime_error("bad label in line: " + line);
        for (auto k = j; k < eq; ++k)
          if (!name_char(line[k]))
            throw std::runtime_error("bad label name in line: " + line);
        if (line[eq + 1] != '"')
          throw std::runtime_error("unquoted label value in line: " + line);
        auto k = eq + 2;
        while (k < line.size() && line[k] != '"')
          k += line[k] == '\\' ? 2 : 1;
        if (k >= line.size())
          throw std::runtime_error("unterminated label value in line: " + line);
        j = k + 1;
        if (j < close && line[j] == ',')
          ++j;
      }
      series = line.substr(0, close + 1);
      i = close + 1;
    }
    if (i >= line.size() || line[i] != ' ')
      throw std::runtime_error("no value in line: " + line);
    auto value_text = line.substr(i + 1);
    if (const auto sp = value_text.find(' '); sp != std::string::npos)
      value_text.resize(sp); // timestamp
    if (!m.types.count(family_of(name, m.types)))
      throw std::runtime_error("sample before its # TYPE line: " + line);
    if (!m.samples.emplace(series, parse_number(value_text, line)).second)
      throw std::runtime_error("duplicate series: " + line);
  }
  check_histograms(m);
  return m;
}

} // namespace aisp::serving
