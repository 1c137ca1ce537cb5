#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "core/measure/stopping.hpp"

namespace {

using aisp::evaluate_stop;
using aisp::StoppingRule;
using aisp::StopState;
using aisp::hot_batch;
using aisp::warmup_launch_s;
using aisp::sampling_budget_s;

// n samples of about 1 ms: 1 ms * (1 + step * k) for k = 1..n in a scrambled order. For n = 20 the
// 95% interval of the median is X(6), X(15), so the relative half width is 4.5 step / (1 + 10.5
// step).
std::vector<double> spread_samples(int n, double step) {
  std::vector<double> v;
  for (int k = 1; k <= n; ++k) v.push_back(1e-3 * (1.0 + step * k));
  std::rotate(v.begin(), v.begin() + n / 2, v.end());
  return v;
}

const StoppingRule k_default{};
const std::vector<double> k_quiet = spread_samples(20, 1e-4);   // +-0.045%
const std::vector<double> k_middle = spread_samples(20, 4e-3);  // +-1.7%
const std::vector<double> k_noisy = spread_samples(20, 1e-2);   // +-4.1%

TEST(StoppingRule, DocumentedDefaults) {
  EXPECT_EQ(k_default.min_samples, 10u);
  EXPECT_DOUBLE_EQ(k_default.min_time_s, 0.2);
  EXPECT_DOUBLE_EQ(k_default.max_time_s, 5.0);
  EXPECT_DOUBLE_EQ(k_default.target_rel_ci, 0.01);
  EXPECT_DOUBLE_EQ(k_default.noisy_rel_ci, 0.03);
  EXPECT_DOUBLE_EQ(k_default.max_extension, 10.0);
  EXPECT_DOUBLE_EQ(k_default.max_noisy_extension, 4.0);
}

TEST(EvaluateStop, QuietSetConverges) {
  EXPECT_EQ(evaluate_stop(k_default, k_quiet, 0.25, 0.4), StopState::converged);
  // Convergence wins over a budget spent on the same call.
  EXPECT_EQ(evaluate_stop(k_default, k_quiet, 0.25, 6.0), StopState::converged);
}

TEST(EvaluateStop, MinimumsHoldBackConvergence) {
  // Too few samples: quiet, enough time, but 9 < 10 (and 9 samples do give a valid 95% interval).
  const std::vector<double> nine(k_quiet.begin(), k_quiet.begin() + 9);
  EXPECT_EQ(evaluate_stop(k_default, nine, 0.25, 0.4), StopState::keep_sampling);
  // Enough samples, not enough measured time.
  EXPECT_EQ(evaluate_stop(k_default, k_quiet, 0.19, 0.4), StopState::keep_sampling);
  // Nothing at all yet.
  EXPECT_EQ(evaluate_stop(k_default, std::vector<double>{}, 0.0, 0.0), StopState::keep_sampling);
}

TEST(EvaluateStop, NoisySetKeepsSamplingThenRunsOutOfBudget) {
  EXPECT_EQ(evaluate_stop(k_default, k_noisy, 1.0, 2.0), StopState::keep_sampling);
  // At the budget, +-4.1% projects to +-2.05% at 4x the budget (x sqrt(5 / 20)): sample on.
  EXPECT_EQ(evaluate_stop(k_default, k_noisy, 1.0, 5.0), StopState::keep_sampling);
  // An interval that has not narrowed as the samples grew no longer projects within +-3%: NOISY.
  EXPECT_EQ(evaluate_stop(k_default, k_noisy, 1.0, 12.0), StopState::budget_spent_noisy);
  EXPECT_EQ(evaluate_stop(k_default, k_noisy, 1.0, 20.0), StopState::budget_spent_noisy);
  // Once it has narrowed within +-3% (the middle set, +-1.7%), the extension ends the variant quiet.
  EXPECT_EQ(evaluate_stop(k_default, k_middle, 1.0, 9.0), StopState::budget_spent_ok);
}

TEST(EvaluateStop, AnIntervalTooWideToNarrowInTimeIsNoisyAtTheBudget) {
  const std::vector<double> wide = spread_samples(20, 3e-2);  // +-10.3%: +-5.1% at best by 4x the budget
  EXPECT_EQ(evaluate_stop(k_default, wide, 1.0, 5.0), StopState::budget_spent_noisy);
  StoppingRule no_noisy_extension;
  no_noisy_extension.max_noisy_extension = 1.0;
  EXPECT_EQ(evaluate_stop(no_noisy_extension, k_noisy, 1.0, 5.0), StopState::budget_spent_noisy);
}

TEST(EvaluateStop, MiddleSetRunsOutOfBudgetWithinNoisyBound) {
  EXPECT_EQ(evaluate_stop(k_default, k_middle, 1.0, 4.9), StopState::keep_sampling);
  EXPECT_EQ(evaluate_stop(k_default, k_middle, 1.0, 5.0), StopState::budget_spent_ok);
}

TEST(EvaluateStop, TooFewSamplesAtBudgetIsNoisy) {
  // Five samples cannot give a 95% interval of the median, however close they are.
  // A slow variant keeps sampling past its budget toward a valid interval, up to max_extension times it.
  const std::vector<double> five(k_quiet.begin(), k_quiet.begin() + 5);
  EXPECT_EQ(evaluate_stop(k_default, five, 0.5, 5.0), StopState::keep_sampling);
  EXPECT_EQ(evaluate_stop(k_default, five, 0.5, 49.9), StopState::keep_sampling);
  EXPECT_EQ(evaluate_stop(k_default, five, 0.5, 50.0), StopState::budget_spent_noisy);
  // Six quiet samples give a valid interval (X(1), X(6) covers 96.9%): no extension needed.
  const std::vector<double> six(k_quiet.begin(), k_quiet.begin() + 6);
  EXPECT_EQ(evaluate_stop(k_default, six, 0.5, 5.0), StopState::budget_spent_ok);
  EXPECT_EQ(evaluate_stop(k_default, std::vector<double>{}, 0.0, 5.0),
            StopState::budget_spent_noisy);
  // A slow variant with eight quiet samples has a valid interval within +-3%: an honest result.
  const std::vector<double> eight(k_quiet.begin(), k_quiet.begin() + 8);
  EXPECT_EQ(evaluate_stop(k_default, eight, 5.0, 5.0), StopState::budget_spent_ok);
}

TEST(EvaluateStop, RuleFieldsAreHonoured) {
  StoppingRule loose;
  loose.target_rel_ci = 0.05;
  EXPECT_EQ(evaluate_stop(loose, k_noisy, 1.0, 1.0), StopState::converged);

  StoppingRule strict;
  strict.noisy_rel_ci = 0.001;
  EXPECT_EQ(evaluate_stop(strict, k_middle, 1.0, 5.0), StopState::budget_spent_noisy);

  StoppingRule many;
  many.min_samples = 50;
  EXPECT_EQ(evaluate_stop(many, k_quiet, 1.0, 1.0), StopState::keep_sampling);

  StoppingRule short_budget;
  short_budget.max_time_s = 0.5;
  EXPECT_EQ(evaluate_stop(short_budget, k_noisy, 0.3, 0.5), StopState::keep_sampling);  // its extension
  EXPECT_EQ(evaluate_stop(short_budget, k_noisy, 0.3, 2.0), StopState::budget_spent_noisy);

  StoppingRule no_extension;
  no_extension.max_extension = 1.0;
  const std::vector<double> three(k_quiet.begin(), k_quiet.begin() + 3);
  EXPECT_EQ(evaluate_stop(no_extension, three, 0.3, 5.0), StopState::budget_spent_noisy);
}

}  // namespace

// The harness's path: warm-up times -> one launch's time -> launches per sample.
int batch_of(std::span<const double> warmup, double target_interval_s, int max_batch) {
  return hot_batch(warmup_launch_s(warmup), target_interval_s, max_batch);
}

TEST(HotBatch, BatchesShortLaunchesToTheInterval) {
  const std::vector<double> warmup = {0.5, 0.125, 0.125, 0.125};  // the first is not among the last three
  EXPECT_EQ(warmup_launch_s(warmup), 0.125);
  EXPECT_EQ(batch_of(warmup, 1.0, 256), 8);
  EXPECT_EQ(batch_of(std::vector<double>{1e-6, 1e-6, 1e-6}, 1e-3, 256), 256);  // capped
}

TEST(HotBatch, OneLaunchAtLeastTheIntervalLongIsNotBatched) {
  EXPECT_EQ(batch_of(std::vector<double>{5.8}, 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{5.8, 5.7}, 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{1e-3}, 1e-3, 256), 1);
}

TEST(HotBatch, FewerThanThreeWarmUpLaunchesUseThoseThereAre) {
  // `--warmup 1` with launches of seconds: one time, which must not be read as three.
  const std::vector<double> storage = {1e-300, 1e-300, 5.8};
  EXPECT_EQ(warmup_launch_s(std::span(storage).last(1)), 5.8);
  EXPECT_EQ(batch_of(std::span(storage).last(1), 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{0.0625}, 1.0, 256), 16);
  EXPECT_EQ(warmup_launch_s(std::vector<double>{0.125, 0.375}), 0.25);  // the median of two
  EXPECT_EQ(batch_of(std::vector<double>{0.125, 0.375}, 1.0, 256), 4);
}

TEST(HotBatch, NoOrBrokenTimesGiveOne) {
  EXPECT_EQ(warmup_launch_s({}), 0.0);
  EXPECT_EQ(batch_of({}, 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{0.0}, 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{-1.0}, 1e-3, 256), 1);
  EXPECT_EQ(warmup_launch_s(std::vector<double>{std::nan("")}), 0.0);
  EXPECT_EQ(batch_of(std::vector<double>{std::nan("")}, 1e-3, 256), 1);
  EXPECT_EQ(batch_of(std::vector<double>{1e-6}, 1e-3, 1), 1);
  EXPECT_EQ(hot_batch(std::nan(""), 1e-3, 256), 1);
}

TEST(SamplingBudget, TheLadderRaisesTheDefaultButNeverTheUsersChoice) {
  EXPECT_EQ(sampling_budget_s(5.0, false, 0.0), 5.0) << "no ladder budget: the run's";
  EXPECT_EQ(sampling_budget_s(5.0, false, 40.0), 40.0) << "the default, raised by the ladder";
  EXPECT_EQ(sampling_budget_s(5.0, false, 2.0), 5.0) << "a ladder never lowers it";
  EXPECT_EQ(sampling_budget_s(1.0, true, 40.0), 1.0) << "--max-time as given, even below the ladder's";
  EXPECT_EQ(sampling_budget_s(60.0, true, 40.0), 60.0);
}
