// Statistics of timing samples. Methods are documented in docs/measurement-methods.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace aisp::stats {

// Quantile by linear interpolation between order statistics (Hyndman-Fan type 7, numpy's default).
// q in [0, 1]. Throws std::invalid_argument on an empty span, a NaN or infinite sample, or q
// outside [0, 1] (the same input checks apply to every function here).
double quantile(std::span<const double> samples, double q);
double median(std::span<const double> samples);

struct Interval {
  double low = 0;
  double high = 0;
  double level = 0;     // the coverage actually achieved (>= the level asked for when valid)
  bool valid = false;   // false when too few samples for the level asked (then low=min, high=max)
};

// Distribution-free confidence interval of the median from order statistics: the narrowest pair of
// order statistics X(j), X(n-j+1), symmetric in rank, whose exact binomial(n, 1/2) coverage is at least
// `level`. Needs n >= 6 for 95%. level must lie in (0, 1).
Interval median_ci(std::span<const double> samples, double level = 0.95);

struct Summary {
  std::size_t n = 0;
  double median = 0, mean = 0, stdev = 0, cv = 0, min = 0, max = 0, p05 = 0, p95 = 0;
  Interval median_ci;
  // Half-width of the median's interval relative to the median: max(median-low, high-median)/median.
  double rel_ci_half_width = 0;
};

// All of the above; stdev is the sample standard deviation (n-1), cv = stdev/mean (0 when n < 2).
Summary summarize(std::span<const double> samples);

struct RatioEstimate {
  double ratio = 0;  // median(numerator) / median(denominator)
  Interval interval; // bootstrap percentile interval
};

// Ratio of medians with a bootstrap percentile interval: each resample draws both sets independently with
// replacement. Deterministic for a given seed, with the same result on every standard library
// (own PRNG, splitmix64) and for any order of the input samples. Used for speedup =
// median(baseline) / median(variant). Throws std::invalid_argument on an empty set, resamples < 1,
// level outside (0, 1), or a denominator sample <= 0 (any sample can become a resample's median).
// interval.level is the level asked for; interval.valid is false when either set is too small for
// a valid median_ci at that level.
RatioEstimate ratio_of_medians(std::span<const double> numerator, std::span<const double> denominator,
                               int resamples = 2000, double level = 0.95,
                               std::uint64_t seed = 0x5eed5eedULL);

}  // namespace aisp::stats
