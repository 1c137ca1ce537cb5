// The host reference and the tolerance of ch01:goodput.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "chapters/ch01_goodput/goodput/reference.hpp"

namespace {

using namespace aisp::ch01::goodput;

TEST(GoodputReference, OneElementHalvesItsResidualEachStep) {
  // x = 1, t = 0, w0 = 1: r = w, w <- w - 0.5 w, so r_s = 2^-s and loss_s = r_s^2 / 2.
  const auto losses = training_losses_reference({1.0}, {0.0}, {1.0}, 4);
  ASSERT_EQ(losses.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(losses[s], 0.5 * std::pow(0.25, s)) << "step " << s;
}

TEST(GoodputReference, LossIsTheMeanOverElements) {
  // Two elements that never move (x = 0): the loss is (t0^2 + t1^2) / 4 at every step.
  const auto losses = training_losses_reference({0.0, 0.0}, {1.0, 3.0}, {5.0, 7.0}, 3);
  for (const double l : losses) EXPECT_DOUBLE_EQ(l, 2.5);
}

struct Inputs {
  std::vector<float> x, t, w0;
};

Inputs uniform_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Inputs in{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    in.x[i] = dist(rng);
    in.t[i] = dist(rng);
    in.w0[i] = dist(rng);
  }
  return in;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The variants' arithmetic, operation for operation (training_step.cu): fp32 trajectory with explicit
// fmas, the sum of r^2 in double, each loss rounded to float.
std::vector<float> fp32_losses(const Inputs& in, int steps) {
  std::vector<float> w = in.w0, r(in.x.size()), losses(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    double sum = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      r[i] = std::fma(w[i], in.x[i], -in.t[i]);
      sum += static_cast<double>(r[i]) * r[i];
    }
    losses[static_cast<std::size_t>(s)] = static_cast<float>(0.5 * sum / static_cast<double>(w.size()));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::fma(-k_learning_rate, r[i] * in.x[i], w[i]);
  }
  return losses;
}

double worst_relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t s = 0; s < want.size(); ++s) worst = std::max(worst, std::fabs(got[s] - want[s]) / want[s]);
  return worst;
}

TEST(GoodputTolerance, CoversTheFp32TrajectoryWithMargin) {
  for (const int steps : {7, 100, 400}) {
    const auto in = uniform_inputs(std::size_t{1} << 14, static_cast<std::uint64_t>(steps));
    const auto want = training_losses_reference(widen(in.x), widen(in.t), widen(in.w0), steps);
    const double err = worst_relative_error(fp32_losses(in, steps), want);
    EXPECT_LE(err, loss_rtol(steps) / 4) << steps << " steps";
  }
}

TEST(GoodputTolerance, CatchesASkippedStepAndAWrongLearningRate) {
  const int steps = 100;
  const auto in = uniform_inputs(std::size_t{1} << 14, 3);
  const auto want = training_losses_reference(widen(in.x), widen(in.t), widen(in.w0), steps);
  // The losses fall every step by more than the tolerance: a variant one step behind fails.
  for (int s = 0; s + 1 < steps; ++s) {
    EXPECT_GT((want[s] - want[s + 1]) / want[s + 1], 2 * loss_rtol(steps)) << "step " << s;
  }
  // Twice the learning rate is a different trajectory from the second step on.
  std::vector<double> x = widen(in.x), t = widen(in.t), w = widen(in.w0);
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = w[i] * x[i] - t[i];
    w[i] -= 2 * static_cast<double>(k_learning_rate) * r * x[i];
    const double r1 = w[i] * x[i] - t[i];
    sum += r1 * r1;
  }
  const double wrong = 0.5 * sum / static_cast<double>(x.size());
  EXPECT_GT(std::fabs(wrong - want[1]) / want[1], 10 * loss_rtol(steps));
}

TEST(GoodputTolerance, ScalesWithTheSteps) {
  EXPECT_NEAR(loss_rtol(100), 6400.0 / 16777216.0, 1e-15);
  EXPECT_LT(loss_rtol(100), 1e-3);
}

}  // namespace
