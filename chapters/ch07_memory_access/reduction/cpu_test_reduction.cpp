// The host reference and the tolerance of ch07:reduction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch07_memory_access/reduction/reference.hpp"

namespace {

using namespace aisp::ch07::reduction;

TEST(ReductionReference, SmallSumsAreExact) {
  EXPECT_EQ(sum_reference(std::vector<float>{1.0f, 2.0f, 3.5f}), 6.5);
  EXPECT_EQ(sum_reference(std::vector<float>{}), 0.0);
  EXPECT_EQ(sum_reference(std::vector<float>{-0.25f, 0.25f, 0.125f}), 0.125);
}

TEST(ReductionReference, KeepsWhatAPlainDoubleSumLosesToCancellation) {
  // 1e16 + 1 is not representable in double (the spacing there is 2); a plain loop returns 0.
  const std::vector<double> x = {1e16, 1.0, -1e16};
  double plain = 0;
  for (const double v : x) plain += v;
  EXPECT_EQ(plain, 0.0);
  EXPECT_EQ(sum_reference(x), 1.0);
}

// A running fp32 sum, the order of step 01 (every element added to one address in turn).
float serial_fp32_sum(const std::vector<float>& x) {
  float s = 0;
  for (const float v : x) s += v;
  return s;
}

std::vector<float> uniform_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST(ReductionTolerance, CoversTheRunningFp32SumWithMargin) {
  const std::size_t n = std::size_t{1} << 20;
  const double atol = sum_atol(n, uniform_rms());
  double worst = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const auto x = uniform_inputs(n, seed);
    const double error = std::fabs(static_cast<double>(serial_fp32_sum(x)) - sum_reference(x));
    EXPECT_LE(error, atol) << "seed " << seed;
    worst = std::max(worst, error);
  }
  // The margin is real but not absurd: the worst running-sum error is a visible fraction of atol (the
  // analysis in reference.hpp puts the typical error near a tenth of it).
  EXPECT_GT(worst, atol / 50);
  EXPECT_LT(worst, atol / 2);
}

TEST(ReductionTolerance, IsSmallAgainstTheSumAtTheDefaultSize) {
  const std::size_t n = std::size_t{1} << 28;
  const double typical_sum = std::sqrt(static_cast<double>(n)) * uniform_rms();  // a random walk's size
  EXPECT_LT(sum_atol(n, uniform_rms()), 0.005 * typical_sum);
  EXPECT_NEAR(sum_atol(n, uniform_rms()), 3.0 * 16.0 / std::sqrt(3.0), 1e-9);  // u * 2^28 = 16
}

}  // namespace
