#include "core/measure/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace aisp::stats {

namespace {

// A NaN would break the strict weak ordering std::sort relies on, and an infinite time is a harness
// bug; both are rejected here rather than producing a plausible-looking statistic.
std::vector<double> sorted_copy(std::span<const double> samples, const char* what) {
  if (samples.empty()) throw std::invalid_argument(std::string(what) + ": no samples");
  for (double x : samples) {
    if (!std::isfinite(x)) throw std::invalid_argument(std::string(what) + ": non-finite sample");
  }
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// Type 7: h = (n-1)q, interpolate between X(floor h) and X(floor h + 1) (0-based). Written as
// lo + frac*(hi-lo) so that equal neighbours give exactly that value.
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

void check_level(double level, const char* what) {
  if (!(level > 0.0 && level < 1.0)) {
    throw std::invalid_argument(std::string(what) + ": level must be in (0, 1)");
  }
}

// Coverage of [X(j), X(n-j+1)] is P(j <= B <= n-j) for B ~ binomial(n, 1/2), i.e. 1 - 2 P(B <= j-1)
// by symmetry. The pmf is built in log space so that 2^-n does not underflow for large n.
Interval median_ci_sorted(const std::vector<double>& sorted, double level) {
  const std::size_t n = sorted.size();
  // Coverage equal to the level in exact arithmetic (e.g. n=3, level=0.75) must count as reaching
  // it. The log-space pmf errs by far less than this tolerance (checked against exact sums up to
  // n=5000), and adjacent coverages differ by far more for any practical n.
  constexpr double k_tolerance = 1e-12;
  const double log_half_n = -static_cast<double>(n) * std::log(2.0);

  double log_pmf = log_half_n;  // log P(B = 0)
  double tail = 0.0;            // P(B <= j-1)
  std::size_t best_j = 0;
  double best_coverage = 0.0;
  for (std::size_t j = 1; 2 * j <= n + 1; ++j) {
    tail += std::exp(log_pmf);  // add P(B = j-1)
    const double coverage = std::max(0.0, 1.0 - 2.0 * tail);
    if (j == 1 && coverage + k_tolerance < level) {
      // Even the full range [min, max] does not reach the level: report it, flagged invalid.
      return Interval{sorted.front(), sorted.back(), coverage, false};
    }
    if (coverage + k_tolerance < level) break;  // coverage only shrinks as j grows
    best_j = j;
    best_coverage = coverage;
    // P(B = j) = P(B = j-1) * (n-j+1) / j
    log_pmf += std::log(static_cast<double>(n - j + 1)) - std::log(static_cast<double>(j));
  }
  return Interval{sorted[best_j - 1], sorted[n - best_j], std::min(best_coverage, 1.0), true};
}

// splitmix64 (Steele, Lea, Flood 2014): a few lines, fully specified, so that a bootstrap with a
// given seed gives the same interval with every standard library (the std:: distributions are not
// specified).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : m_state(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform index in [0, bound): rejection of the low values that would bias the modulo.
  std::size_t below(std::size_t bound) {
    const auto b = static_cast<std::uint64_t>(bound);
    const std::uint64_t threshold = (0 - b) % b;  // 2^64 mod b
    std::uint64_t r = next();
    while (r < threshold) r = next();
    return static_cast<std::size_t>(r % b);
  }

 private:
  std::uint64_t m_state;
};

// Median of a resample, O(n) with nth_element; same interpolation as quantile_sorted at q = 0.5.
double median_in_place(std::vector<double>& values) {
  const std::size_t n = values.size();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (n % 2 == 1) return *mid;
  const double lo = *std::max_element(values.begin(), mid);
  return lo + 0.5 * (*mid - lo);
}

double resampled_median(std::span<const double> source, std::vector<double>& buffer,
                        SplitMix64& rng) {
  buffer.resize(source.size());
  for (double& x : buffer) x = source[rng.below(source.size())];
  return median_in_place(buffer);
}

}  // namespace

double quantile(std::span<const double> samples, double q) {
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("quantile: q must be in [0, 1]");
  return quantile_sorted(sorted_copy(samples, "quantile"), q);
}

double median(std::span<const double> samples) { return quantile(samples, 0.5); }

Interval median_ci(std::span<const double> samples, double level) {
  check_level(level, "median_ci");
  return median_ci_sorted(sorted_copy(samples, "median_ci"), level);
}

Summary summarize(std::span<const double> samples) {
  const std::vector<double> sorted = sorted_copy(samples, "summarize");
  Summary s;
  s.n = sorted.size();
  s.median = quantile_sorted(sorted, 0.5);
  s.min = sorted.front();
  s.max = sorted.back();
  s.p05 = quantile_sorted(sorted, 0.05);
  s.p95 = quantile_sorted(sorted, 0.95);
  // Two passes (mean, then squared deviations) rather than sum of squares, which cancels badly when
  // the spread is tiny against the mean, as it is for quiet timings.
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.n);
  if (s.n >= 2) {
    double ss = 0.0;
    for (double x : sorted) ss += (x - s.mean) * (x - s.mean);
    s.stdev = std::sqrt(ss / static_cast<double>(s.n - 1));
    s.cv = s.mean != 0.0 ? s.stdev / s.mean : 0.0;
  }
  s.median_ci = median_ci_sorted(sorted, 0.95);
  const double half = std::max(s.median - s.median_ci.low, s.median_ci.high - s.median);
  if (half == 0.0) {
    s.rel_ci_half_width = 0.0;
  } else if (s.median != 0.0) {
    s.rel_ci_half_width = half / std::abs(s.median);
  } else {
    s.rel_ci_half_width = std::numeric_limits<double>::infinity();
  }
  return s;
}

RatioEstimate ratio_of_medians(std::span<const double> numerator,
                               std::span<const double> denominator, int resamples, double level,
                               std::uint64_t seed) {
  check_level(level, "ratio_of_medians");
  if (resamples < 1) throw std::invalid_argument("ratio_of_medians: resamples must be >= 1");
  const std::vector<double> num = sorted_copy(numerator, "ratio_of_medians (numerator)");
  const std::vector<double> den = sorted_copy(denominator, "ratio_of_medians (denominator)");
  // Every denominator sample, not only the median, must be positive: a resample may pick any of
  // them as its median, and a ratio to zero or a negative time has no meaning.
  if (den.front() <= 0.0) {
    throw std::invalid_argument("ratio_of_medians: denominator samples must be positive");
  }

  RatioEstimate est;
  est.ratio = quantile_sorted(num, 0.5) / quantile_sorted(den, 0.5);

  SplitMix64 rng(seed);
  std::vector<double> ratios(static_cast<std::size_t>(resamples));
  std::vector<double> buffer;
  for (double& r : ratios) {
    // Numerator first, then denominator: the draw order is part of the seed's contract.
    const double m_num = resampled_median(num, buffer, rng);
    const double m_den = resampled_median(den, buffer, rng);
    r = m_num / m_den;
  }
  std::sort(ratios.begin(), ratios.end());
  est.interval.low = quantile_sorted(ratios, (1.0 - level) / 2.0);
  est.interval.high = quantile_sorted(ratios, (1.0 + level) / 2.0);
  est.interval.level = level;
  // The bootstrap of a median is unreliable on sets too small for a distribution-free interval of
  // the median at this level; the bounds are still reported but not claimed.
  est.interval.valid = median_ci_sorted(num, level).valid && median_ci_sorted(den, level).valid;
  return est;
}

}  // namespace aisp::stats
