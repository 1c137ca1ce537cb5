// serving/metrics: histogram bucketing, the exposition text, and the strict parser that reads it
// back.
#include <gtest/gtest.h>
#include <thread>

#include "serving/metrics.hpp"

namespace aisp::serving {
namespace {

TEST(ServingMetrics, HistogramBucketsAreLessOrEqualAndCumulative) {
  Histogram h({0.1, 0.5, 1.0});
  for (const double v : {0.05, 0.1, 0.2, 0.5, 0.7, 3.0})
    h.observe(v);
  const auto s = h.snapshot();
  EXPECT_EQ(s.cumulative,
            (std::vector<std::uint64_t>{2, 4, 5, 6})); // 0.1 and 0.5 fall on their bounds
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 4.55);
  EXPECT_THROW(Histogram({1.0, 0.5}), std::invalid_argument);
}

TEST(ServingMetrics, ConcurrentObservationsAreAllCounted) {
  Histogram h(ttft_buckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        h.observe(0.003);
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(h.snapshot().count, 4000u);
}

TEST(ServingMetrics, WriterOutputParsesBack) {
  Histogram h({0.5, 1.0});
  h.observe(0.25);
  h.observe(2.0);
  PrometheusWriter w;
  w.counter_family("x_requests_total", "requests",
                   {{{{"outcome", "ok"}}, 3}, {{{"outcome", "bad\"one"}}, 1}});
  w.gauge("x_running", "running", 2);
  w.counter("x_tokens_total", "tokens", 1.5);
  w.histogram("x_latency_seconds", "latency", h.snapshot());
  const auto &text = w.text();
  EXPECT_NE(text.find("# TYPE x_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("x_latency_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("x_requests_total{outcome=\"bad\\\"one\"} 1\n"), std::string::npos);
  const auto m = parse_prometheus_text(text);
  EXPECT_EQ(m.value("x_requests_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(m.value("x_running"), 2);
  EXPECT_EQ(m.value("x_tokens_total"), 1.5);
  EXPECT_EQ(m.value("x_latency_seconds_bucket{le=\"0.5\"}"), 1);
  EXPECT_EQ(m.value("x_latency_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(m.value("x_latency_seconds_sum"), 2.25);
  EXPECT_EQ(m.types.at("x_latency_seconds"), "histogram");
}

TEST(ServingMetrics, ParserRejectsWhatAScraperWould) {
  EXPECT_THROW((void)parse_prometheus_text("# TYPE a counter\na 1"),
               std::runtime_error);                                       // no newline
  EXPECT_THROW((void)parse_prometheus_text("a 1\n"), std::runtime_error); // no TYPE
  EXPECT_THROW((void)parse_prometheus_text("# TYPE a counter\na{x=1} 1\n"),
               std::runtime_error); // unquoted
  EXPECT_THROW((void)parse_prometheus_text("# TYPE a counter\na one\n"), std::runtime_error);
  EXPECT_THROW((void)parse_prometheus_text("# TYPE a counter\n1a 1\n"), std::runtime_error);
  EXPECT_THROW((void)parse_prometheus_text("# TYPE a counter\na 1\na 2\n"), std::runtime_error);
  EXPECT_THROW((void)parse_prometheus_text(
                   "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
                   "h_sum 1\nh_count 2\n"),
               std::runtime_error); // not cumulative
  EXPECT_THROW((void)parse_prometheus_text(
                   "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n"),
               std::runtime_error); // +Inf != count
  EXPECT_NO_THROW(
      (void)parse_prometheus_text("# HELP a x\n# TYPE a gauge\na{b=\"c\",d=\"e\"} -1.5e-3\n"));
}

} // namespace
} // namespace aisp::serving
