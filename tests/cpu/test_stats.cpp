// Reference values: type-7 quantiles as numpy.quantile computes them; median intervals from the
// exact binomial(n, 1/2) sums (Python fractions); the bootstrap from an independent Python
// reimplementation of splitmix64 + rejection sampling + the same percentile rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "core/measure/stats.hpp"

namespace {

using aisp::stats::Interval;

const std::vector<double> k_ten{3.1, 1.2, 5.5, 2.2, 4.8, 9.0, 7.3, 6.6, 0.5, 8.1};

// 1..n in a scrambled order, so an interval's bounds are its 1-based order statistics and the input
// order is not already sorted.
std::vector<double> ranks(int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 1.0);
  std::reverse(v.begin(), v.end());
  std::rotate(v.begin(), v.begin() + n / 3, v.end());
  return v;
}

TEST(Quantile, Type7MatchesNumpy) {
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.05), 0.815);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.25), 2.425);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.5), 5.15);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.9), 8.19);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 0.95), 8.595);
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(k_ten, 1.0), 9.0);
}

TEST(Quantile, SingleSampleAndOddMedian) {
  const std::vector<double> one{4.0};
  EXPECT_DOUBLE_EQ(aisp::stats::quantile(one, 0.3), 4.0);
  const std::vector<double> odd{5.0, 1.0, 3.0};
  EXPECT_DOUBLE_EQ(aisp::stats::median(odd), 3.0);
  EXPECT_DOUBLE_EQ(aisp::stats::median(k_ten), 5.15);
}

TEST(Quantile, RejectsBadInput) {
  const std::vector<double> empty;
  EXPECT_THROW(aisp::stats::quantile(empty, 0.5), std::invalid_argument);
  EXPECT_THROW(aisp::stats::median(empty), std::invalid_argument);
  EXPECT_THROW(aisp::stats::quantile(k_ten, -0.01), std::invalid_argument);
  EXPECT_THROW(aisp::stats::quantile(k_ten, 1.01), std::invalid_argument);
  const std::vector<double> with_nan{1.0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_THROW(aisp::stats::median(with_nan), std::invalid_argument);
}

struct CiCase {
  int n;
  double level;
  double low, high;  // 1-based order statistics
  double coverage;
};

TEST(MedianCi, ExactBinomialOrderStatistics) {
  const std::vector<CiCase> cases{
      {6, 0.95, 1, 6, 0.96875},
      {7, 0.95, 1, 7, 0.984375},
      {10, 0.95, 2, 9, 0.978515625},
      {20, 0.95, 6, 15, 0.9586105346679688},
      {30, 0.95, 10, 21, 0.9572260547429323},
      {100, 0.95, 40, 61, 0.9647997997822951},
      {100, 0.99, 37, 64, 0.9933628794840739},
      {1500, 0.95, 712, 789, 0.9532389202177056},
      // 2^-5000 underflows a double: the pmf must not be built from it directly.
      {5000, 0.95, 2431, 2570, 0.9506841418958282},
  };
  for (const CiCase& c : cases) {
    const Interval ci = aisp::stats::median_ci(ranks(c.n), c.level);
    EXPECT_TRUE(ci.valid) << "n=" << c.n;
    EXPECT_DOUBLE_EQ(ci.low, c.low) << "n=" << c.n;
    EXPECT_DOUBLE_EQ(ci.high, c.high) << "n=" << c.n;
    EXPECT_NEAR(ci.level, c.coverage, 1e-12) << "n=" << c.n;
    EXPECT_GE(ci.level, c.level) << "n=" << c.n;
  }
}

TEST(MedianCi, CoverageEqualToLevelCounts) {
  // n=3: [X(1), X(3)] covers exactly 1 - 2/8 = 0.75.
  const Interval ci = aisp::stats::median_ci(std::vector<double>{2.0, 1.0, 3.0}, 0.75);
  EXPECT_TRUE(ci.valid);
  EXPECT_DOUBLE_EQ(ci.low, 1.0);
  EXPECT_DOUBLE_EQ(ci.high, 3.0);
  // n=4 at 50%: X(2), X(3) covers only 6/16, so the full range (0.875) is the narrowest that
  // reaches it.
  const Interval ci4 = aisp::stats::median_ci(ranks(4), 0.5);
  EXPECT_TRUE(ci4.valid);
  EXPECT_DOUBLE_EQ(ci4.low, 1.0);
  EXPECT_DOUBLE_EQ(ci4.high, 4.0);
  EXPECT_NEAR(ci4.level, 0.875, 1e-12);
}

TEST(MedianCi, TooFewSamplesIsInvalidFullRange) {
  const Interval ci = aisp::stats::median_ci(ranks(5), 0.95);
  EXPECT_FALSE(ci.valid);
  EXPECT_DOUBLE_EQ(ci.low, 1.0);
  EXPECT_DOUBLE_EQ(ci.high, 5.0);
  EXPECT_NEAR(ci.level, 0.9375, 1e-12);  // 1 - 2 / 2^5

  const Interval one = aisp::stats::median_ci(std::vector<double>{7.0}, 0.95);
  EXPECT_FALSE(one.valid);
  EXPECT_DOUBLE_EQ(one.low, 7.0);
  EXPECT_DOUBLE_EQ(one.high, 7.0);
}

TEST(MedianCi, RejectsBadInput) {
  EXPECT_THROW(aisp::stats::median_ci(std::vector<double>{}), std::invalid_argument);
  EXPECT_THROW(aisp::stats::median_ci(k_ten, 0.0), std::invalid_argument);
  EXPECT_THROW(aisp::stats::median_ci(k_ten, 1.0), std::invalid_argument);
}

TEST(Summarize, AllFieldsOfKnownSet) {
  const aisp::stats::Summary s = aisp::stats::summarize(k_ten);
  EXPECT_EQ(s.n, 10u);
  EXPECT_DOUBLE_EQ(s.median, 5.15);
  EXPECT_DOUBLE_EQ(s.mean, 4.83);
  EXPECT_NEAR(s.stdev, 2.973979750360711, 1e-12);  // sample (n-1) stdev
  EXPECT_NEAR(s.cv, 0.6157307971761306, 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 0.5);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.p05, 0.815);
  EXPECT_DOUBLE_EQ(s.p95, 8.595);
  // n=10: X(2)=1.2, X(9)=8.1; half width max(5.15-1.2, 8.1-5.15) = 3.95.
  EXPECT_TRUE(s.median_ci.valid);
  EXPECT_DOUBLE_EQ(s.median_ci.low, 1.2);
  EXPECT_DOUBLE_EQ(s.median_ci.high, 8.1);
  EXPECT_NEAR(s.rel_ci_half_width, 3.95 / 5.15, 1e-12);
}

TEST(Summarize, SingleSampleHasNoSpread) {
  const aisp::stats::Summary s = aisp::stats::summarize(std::vector<double>{2.5});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.stdev, 0.0);
  EXPECT_DOUBLE_EQ(s.cv, 0.0);
  EXPECT_FALSE(s.median_ci.valid);
  EXPECT_THROW(aisp::stats::summarize(std::vector<double>{}), std::invalid_argument);
}

TEST(Summarize, StdevStableForTinySpreadOnLargeMean) {
  // Sum-of-squares formulas lose every digit here; the deviations are +-1e-6 around 1e6.
  const std::vector<double> v{1e6 - 1e-6, 1e6, 1e6 + 1e-6};
  EXPECT_NEAR(aisp::stats::summarize(v).stdev, 1e-6, 1e-9);
}

// Speedup-shaped data: a baseline near 1.05 and a variant near 0.52 (from the Python reference).
const std::vector<double> k_base{1.0,  1.07, 1.03, 1.1,  1.06, 1.02,
                                 1.09, 1.05, 1.01, 1.08, 1.04, 1.0};
const std::vector<double> k_fast{0.5,   0.52,  0.54,  0.508, 0.528, 0.548, 0.516, 0.536,
                                 0.504, 0.524, 0.544, 0.512, 0.532, 0.5,   0.52};

TEST(RatioOfMedians, MatchesIndependentReference) {
  const auto est = aisp::stats::ratio_of_medians(k_base, k_fast);
  EXPECT_DOUBLE_EQ(est.ratio, 2.0096153846153846);  // 1.045 / 0.52
  EXPECT_NEAR(est.interval.low, 1.9326704545454543, 1e-12);
  EXPECT_NEAR(est.interval.high, 2.076923076923077, 1e-12);
  EXPECT_DOUBLE_EQ(est.interval.level, 0.95);
  EXPECT_TRUE(est.interval.valid);

  const auto other = aisp::stats::ratio_of_medians(k_base, k_fast, 500, 0.9, 42);
  EXPECT_NEAR(other.interval.low, 1.9379364163559973, 1e-12);
  EXPECT_NEAR(other.interval.high, 2.057692307692308, 1e-12);
}

TEST(RatioOfMedians, DeterministicAndOrderIndependent) {
  const auto a = aisp::stats::ratio_of_medians(k_base, k_fast, 300, 0.95, 7);
  const auto b = aisp::stats::ratio_of_medians(k_base, k_fast, 300, 0.95, 7);
  EXPECT_EQ(a.interval.low, b.interval.low);
  EXPECT_EQ(a.interval.high, b.interval.high);

  std::vector<double> shuffled = k_base;
  std::reverse(shuffled.begin(), shuffled.end());
  const auto c = aisp::stats::ratio_of_medians(shuffled, k_fast, 300, 0.95, 7);
  EXPECT_EQ(a.interval.low, c.interval.low);
  EXPECT_EQ(a.interval.high, c.interval.high);

  const auto d = aisp::stats::ratio_of_medians(k_base, k_fast, 300, 0.95, 8);
  EXPECT_TRUE(a.interval.low != d.interval.low || a.interval.high != d.interval.high);
}

TEST(RatioOfMedians, SameDistributionContainsOne) {
  std::vector<double> reversed = k_base;
  std::reverse(reversed.begin(), reversed.end());
  const auto est = aisp::stats::ratio_of_medians(k_base, reversed);
  EXPECT_DOUBLE_EQ(est.ratio, 1.0);
  EXPECT_LT(est.interval.low, 1.0);
  EXPECT_GT(est.interval.high, 1.0);
}

TEST(RatioOfMedians, SmallSetsAreNotValid) {
  const std::vector<double> three{1.0, 1.1, 1.2};
  const auto est = aisp::stats::ratio_of_medians(three, k_fast);
  EXPECT_FALSE(est.interval.valid);
  EXPECT_LE(est.interval.low, est.interval.high);
}

TEST(RatioOfMedians, RejectsBadInput) {
  const std::vector<double> empty;
  EXPECT_THROW(aisp::stats::ratio_of_medians(empty, k_fast), std::invalid_argument);
  EXPECT_THROW(aisp::stats::ratio_of_medians(k_base, empty), std::invalid_argument);
  EXPECT_THROW(aisp::stats::ratio_of_medians(k_base, std::vector<double>{0.0, 0.0, 0.0}),
               std::invalid_argument);
  EXPECT_THROW(aisp::stats::ratio_of_medians(k_base, std::vector<double>{-1.0, -2.0}),
               std::invalid_argument);
  EXPECT_THROW(aisp::stats::ratio_of_medians(k_base, k_fast, 0), std::invalid_argument);
  EXPECT_THROW(aisp::stats::ratio_of_medians(k_base, k_fast, 100, 1.5), std::invalid_argument);
}

}  // namespace
